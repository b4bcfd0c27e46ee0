// pi 1.6's read tool on image files, for tests/test_tools.py when pi 1.6 is there: for each file
// its text blocks, and its image's type and base64 data (the test compares their pixel sizes;
// the bytes differ by encoder).
// Usage: node pi16_read.mjs PACKAGES DIR NAME...
const [packages, dir, ...names] = process.argv.slice(2);
const { createReadToolDefinition } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const read = createReadToolDefinition(dir);
const answers = {};
for (const name of names) {
  const { content } = await read.execute("read", { path: name });
  answers[name] = content.map((block) =>
    block.type === "image" ? { mimeType: block.mimeType, data: block.data } : block.text);
}
process.stdout.write(JSON.stringify(answers));
