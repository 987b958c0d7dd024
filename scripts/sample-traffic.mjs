// The local app and the requests the screenshot scripts send through a tunnel, so the inspector's and the dashboard's
// pictures show the same realistic traffic (a GitHub and a Stripe webhook, an API call, a favicon).
import { once } from 'node:events';
import { createServer } from 'node:http';
import { request } from 'undici';

/** A small webhook receiver with an API, one route of which is broken (500), on a free loopback port. */
export async function startSampleApp() {
  const app = createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const reply = (status, body) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.url.startsWith('/api/orders')) return reply(500, { error: 'database is locked' });
      if (req.url.startsWith('/webhooks/')) return reply(200, { received: true, bytes: Buffer.concat(chunks).length });
      if (req.url.startsWith('/api/users/')) return reply(200, { id: 42, name: 'Ada', plan: 'pro' });
      return reply(404, { error: 'not found' });
    });
  });
  app.listen(0, '127.0.0.1');
  await once(app, 'listening');
  return { port: app.address().port, close: () => new Promise((resolve) => app.close(resolve)) };
}

export async function sendSampleTraffic(edgePort, subdomain) {
  const host = `${subdomain}.localhost:${edgePort}`;
  const send = async (method, path, body, headers = {}) => {
    const response = await request(`http://127.0.0.1:${edgePort}${path}`, { method, headers: { host, 'user-agent': 'Stripe/1.0 (+https://stripe.com/docs/webhooks)', ...headers }, body });
    await response.body.text();
  };
  await send('GET', '/api/users/42', undefined, { accept: 'application/json', 'user-agent': 'curl/8.5.0' });
  await send('POST', '/webhooks/github', JSON.stringify({ action: 'opened', number: 7, repository: { full_name: 'acme/shop' } }), {
    'content-type': 'application/json',
    'x-github-event': 'pull_request',
    'user-agent': 'GitHub-Hookshot/abc123',
  });
  await send('GET', '/favicon.ico', undefined, { 'user-agent': 'Mozilla/5.0' });
  await send('POST', '/api/orders', JSON.stringify({ sku: 'TEE-RED-M', qty: 2 }), { 'content-type': 'application/json', 'user-agent': 'curl/8.5.0' });
  await send(
    'POST',
    '/webhooks/stripe',
    JSON.stringify({ id: 'evt_1Q2w3E4r', type: 'payment_intent.succeeded', data: { object: { id: 'pi_3Q2w', amount: 4200, currency: 'eur', status: 'succeeded' } } }),
    { 'content-type': 'application/json', 'stripe-signature': 't=1763750000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd' },
  );
}
