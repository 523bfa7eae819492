// Sends the calls of a spec file through the unmodified @segment/analytics-node SDK.
// Usage: node sdk_send.mjs URL TOKEN SPEC.json  — exits 1 if the SDK reported any error.
import { readFileSync } from 'node:fs';
import { Analytics } from '@segment/analytics-node';

const [url, token, specPath] = process.argv.slice(2);
const calls = JSON.parse(readFileSync(specPath, 'utf8'));
const analytics = new Analytics({ writeKey: token, host: url, maxRetries: 2, flushInterval: 200 });
const errors = [];
analytics.on('error', (e) => errors.push(String(e?.message ?? e)));

for (const c of calls) {
  const p = { messageId: c.messageId, timestamp: new Date(c.timestamp), context: c.context };
  if (c.userId !== undefined) p.userId = c.userId;
  if (c.anonymousId !== undefined) p.anonymousId = c.anonymousId;
  switch (c.type) {
    case 'track': analytics.track({ ...p, event: c.event, properties: c.properties }); break;
    case 'identify': analytics.identify({ ...p, traits: c.traits }); break;
    case 'page': analytics.page({ ...p, name: c.name, category: c.category, properties: c.properties }); break;
    case 'screen': analytics.screen({ ...p, name: c.name, properties: c.properties }); break;
    case 'group': analytics.group({ ...p, groupId: c.groupId, traits: c.traits }); break;
    case 'alias': analytics.alias({ ...p, previousId: c.previousId }); break;
    default: throw new Error(`unknown call ${c.type}`);
  }
}
await analytics.closeAndFlush({ timeout: 20000 });
if (errors.length) {
  console.error('SDK errors:', errors.join('; '));
  process.exit(1);
}
