/**
 * The realworld provider-signature table (docs/policies.md, "Webhook providers"): 23 common webhook
 * providers, how each signs, and which Burrow verifies (`verifiedAs`: the --verify-webhook provider that
 * does it; null when Burrow does not). provider-signatures.test.ts signs a sample for every verified row
 * and checks docs/policies.md lists the same rows.
 */
import type { WebhookProvider } from '../../../src/protocol/policy.js';

export interface ProviderRow {
  name: string;
  header: string;
  algorithm: string;
  signed: string;
  tolerance: string;
  verifiedAs: WebhookProvider | null;
}

export const PROVIDER_TABLE: readonly ProviderRow[] = [
  { name: 'GitHub', header: 'X-Hub-Signature-256', algorithm: 'HMAC-SHA256, hex, "sha256=" prefix', signed: 'body', tolerance: 'none', verifiedAs: 'github' },
  { name: 'GitLab', header: 'X-Gitlab-Token', algorithm: 'shared token (no signature)', signed: 'nothing', tolerance: 'none', verifiedAs: 'gitlab' },
  { name: 'Stripe', header: 'Stripe-Signature', algorithm: 'HMAC-SHA256, hex, t=…,v1=…', signed: 'timestamp "." body', tolerance: '300 s', verifiedAs: 'stripe' },
  { name: 'Slack', header: 'X-Slack-Signature', algorithm: 'HMAC-SHA256, hex, "v0=" prefix', signed: '"v0:" timestamp ":" body', tolerance: '300 s', verifiedAs: 'slack' },
  { name: 'Shopify', header: 'X-Shopify-Hmac-Sha256', algorithm: 'HMAC-SHA256, base64', signed: 'body', tolerance: 'none', verifiedAs: 'shopify' },
  { name: 'Twilio', header: 'X-Twilio-Signature', algorithm: 'HMAC-SHA1, base64', signed: 'full URL + sorted form parameters (JSON: URL with bodySHA256)', tolerance: 'none', verifiedAs: 'twilio' },
  { name: 'Svix', header: 'svix-signature', algorithm: 'HMAC-SHA256, base64, "v1," prefix', signed: 'id "." timestamp "." body', tolerance: '300 s', verifiedAs: 'svix' },
  { name: 'Standard Webhooks', header: 'webhook-signature', algorithm: 'HMAC-SHA256, base64, "v1," prefix', signed: 'id "." timestamp "." body', tolerance: '300 s', verifiedAs: 'standard-webhooks' },
  { name: 'Paddle', header: 'Paddle-Signature', algorithm: 'HMAC-SHA256, hex, ts=…;h1=…', signed: 'timestamp ":" body', tolerance: '5 s', verifiedAs: 'paddle' },
  { name: 'Linear', header: 'Linear-Signature', algorithm: 'HMAC-SHA256, hex', signed: 'body (webhookTimestamp inside)', tolerance: '60 s', verifiedAs: 'linear' },
  { name: 'Resend', header: 'svix-signature', algorithm: 'Svix', signed: 'id "." timestamp "." body', tolerance: '300 s', verifiedAs: 'svix' },
  { name: 'Clerk', header: 'svix-signature', algorithm: 'Svix', signed: 'id "." timestamp "." body', tolerance: '300 s', verifiedAs: 'svix' },
  { name: 'Dropbox', header: 'X-Dropbox-Signature', algorithm: 'HMAC-SHA256, hex', signed: 'body', tolerance: 'none', verifiedAs: 'hmac-sha256' },
  { name: 'Typeform', header: 'Typeform-Signature', algorithm: 'HMAC-SHA256, base64, "sha256=" prefix', signed: 'body', tolerance: 'none', verifiedAs: 'hmac-sha256' },
  { name: 'Zoom', header: 'x-zm-signature', algorithm: 'HMAC-SHA256, hex, "v0=" prefix', signed: '"v0:" timestamp ":" body', tolerance: 'not given', verifiedAs: null },
  { name: 'Twitch EventSub', header: 'Twitch-Eventsub-Message-Signature', algorithm: 'HMAC-SHA256, hex, "sha256=" prefix', signed: 'message id + timestamp + body', tolerance: '10 min', verifiedAs: null },
  { name: 'HubSpot (v3)', header: 'X-HubSpot-Signature-v3', algorithm: 'HMAC-SHA256, base64', signed: 'method + URI + body + timestamp', tolerance: '5 min', verifiedAs: null },
  { name: 'Square', header: 'x-square-hmacsha256-signature', algorithm: 'HMAC-SHA256, base64', signed: 'notification URL + body', tolerance: 'none', verifiedAs: null },
  { name: 'Mailgun', header: '(in the body: signature.signature)', algorithm: 'HMAC-SHA256, hex', signed: 'timestamp + token from the body', tolerance: 'advised', verifiedAs: null },
  { name: 'Discord (interactions)', header: 'X-Signature-Ed25519', algorithm: 'Ed25519 (public key)', signed: 'timestamp + body', tolerance: 'none', verifiedAs: null },
  { name: 'SendGrid (event webhook)', header: 'X-Twilio-Email-Event-Webhook-Signature', algorithm: 'ECDSA P-256 (public key)', signed: 'timestamp + body', tolerance: 'advised', verifiedAs: null },
  { name: 'PayPal', header: 'PAYPAL-TRANSMISSION-SIG', algorithm: 'RSA-SHA256 with a certificate PayPal serves', signed: 'transmission id | time | webhook id | CRC32 of body', tolerance: 'none', verifiedAs: null },
  { name: 'Vercel', header: 'x-vercel-signature', algorithm: 'HMAC-SHA1, hex', signed: 'body', tolerance: 'none', verifiedAs: null },
];
