// Regenerates src/schema.ts from a running API's /openapi.json, or (--check) fails when the
// committed file no longer matches it. One code path for both, so the check means what it says.
//
//   HINDSIGHT_URL=http://127.0.0.1:8765 npm run generate
//   HINDSIGHT_URL=http://127.0.0.1:8765 npm run check-schema
import { readFile, writeFile } from "node:fs/promises";
import openapiTS, { astToString, COMMENT_HEADER } from "openapi-typescript";

const TARGET = new URL("../src/schema.ts", import.meta.url);

async function generatedSchema(baseUrl, apiKey) {
  const headers = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  const response = await fetch(`${baseUrl.replace(/\/+$/, "")}/openapi.json`, { headers });
  if (!response.ok) {
    throw new Error(`GET ${baseUrl}/openapi.json: HTTP ${response.status}`);
  }
  const document = await response.json();
  return COMMENT_HEADER + astToString(await openapiTS(document, { silent: true }));
}

async function main() {
  const baseUrl = process.env.HINDSIGHT_URL;
  if (!baseUrl) {
    console.error("HINDSIGHT_URL is not set (the API's base URL, e.g. http://127.0.0.1:8765)");
    process.exit(2);
  }
  const fresh = await generatedSchema(baseUrl, process.env.HINDSIGHT_API_KEY);
  if (process.argv.includes("--check")) {
    if (fresh !== (await readFile(TARGET, "utf8"))) {
      console.error("src/schema.ts is out of date with the API: run `npm run generate`");
      process.exit(1);
    }
    console.log("src/schema.ts matches the API's /openapi.json");
    return;
  }
  await writeFile(TARGET, fresh);
  console.log(`wrote ${TARGET.pathname}`);
}

await main();
