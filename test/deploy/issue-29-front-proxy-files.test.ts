/**
 * Issue 29, point 5: the front-proxy files in deploy/ redirected HTTP to HTTPS with 301 (which lets a
 * client re-send a webhook POST as a GET, as deploy.md itself explains) and carried a commented HSTS line
 * with includeSubDomains, which deploy.md argues against; deploy.md's "Behind a front proxy" step 2 sed
 * replaced 127.0.0.1:8080 with itself. The nginx files are run by test/edge/front-proxy.test.ts and
 * test/cluster/front-proxy-cluster.test.ts (a POST answered 308 there); HAProxy is not installed here,
 * so its file is read, not run.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, tempDir } from '../helpers.js';
import { installAsDeployGuide } from '../nginx-front.js';

const DEPLOY = join(ROOT, 'deploy');
const files = readdirSync(DEPLOY).filter((name) => /nginx|haproxy/.test(name));

test('every front-proxy file redirects HTTP to HTTPS with 308, never 301 or 302', () => {
  assert.deepEqual(files.sort(), ['haproxy-burrow-cluster.cfg', 'nginx-burrow-cluster.conf', 'nginx-burrow.conf']);
  for (const name of files) {
    const active = readFileSync(join(DEPLOY, name), 'utf8')
      .split('\n')
      .filter((line) => !line.trim().startsWith('#'));
    const redirects = active.filter((line) => /\breturn\s+30\d\b|\bredirect\b.*\bcode\s+30\d\b/.test(line));
    assert.ok(redirects.length > 0, `${name} redirects plain HTTP`);
    for (const line of redirects) assert.match(line, /\b308\b/, `${name}: ${line.trim()}`);
  }
});

test('HSTS is the edge\'s (--hsts, no includeSubDomains), never set by the proxy for every tunnel name', () => {
  for (const name of [...files, 'Caddyfile']) {
    const text = readFileSync(join(DEPLOY, name), 'utf8');
    // Not even commented out: uncommenting it would cover every <name>.<domain>, which deploy.md argues against.
    assert.doesNotMatch(text, /(add_header|set-header|header)\s+"?Strict-Transport-Security/i, name);
    for (const line of text.split('\n').filter((each) => /includeSubDomains/i.test(each))) assert.match(line, /no includeSubDomains/, `${name}: ${line.trim()}`);
  }
});

test("deploy.md's step 2 replaces every placeholder of deploy/nginx-burrow.conf and says what nginx listens on", () => {
  const values = { DOMAIN: 'tunnels.mycompany.test', EDGE: '127.0.0.1:9000', AGENT: '127.0.0.1:9001', CERTS: '/srv/certs/mycompany' };
  const installed = installAsDeployGuide(tempDir('burrow-issue29-guide-'), values);
  assert.doesNotMatch(installed, /tunnels\.example\.com|127\.0\.0\.1:808[01]|\/etc\/letsencrypt/);
  assert.match(installed, /server_name tunnels\.mycompany\.test \*\.tunnels\.mycompany\.test;/);
  assert.match(installed, /server 127\.0\.0\.1:9000;/);
  // The agent port (issue 24): tunnel clients' /api/v1/connect goes there.
  assert.match(installed, /upstream burrow_agent \{\s+server 127\.0\.0\.1:9001;/);
  assert.match(installed, /"tunnels\.mycompany\.test\/api\/v1\/connect" +burrow_agent;/);
  assert.match(installed, /ssl_certificate +\/srv\/certs\/mycompany\/fullchain\.pem;/);
  assert.match(installed, /ssl_certificate_key +\/srv\/certs\/mycompany\/privkey\.pem;/);
  const deploy = readFileSync(join(ROOT, 'docs', 'deploy.md'), 'utf8');
  const step = deploy.slice(deploy.indexOf('2. Install the example with your names'), deploy.indexOf('3. Run the edge on loopback'));
  assert.match(step, /port 80 \(plain HTTP/);
  assert.match(step, /port 443 \(HTTPS\s+with `\$CERTS\/fullchain\.pem` and `\$CERTS\/privkey\.pem`\)/);
  assert.match(step, /`308`\s+redirect/);
});
