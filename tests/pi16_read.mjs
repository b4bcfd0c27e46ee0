// pi 1.6's read tool on image files, for tests/test_tools.py when pi 1.6 is there: for each file
// its text blocks, and its image's type and base64 data (the test compares their pixel sizes;
// the bytes differ by encoder). With --no-resize, as settings' `images.autoResize: false` has it.
// Usage: node pi16_read.mjs PACKAGES DIR [--no-resize] NAME...
const [packages, dir, ...rest] = process.argv.slice(2);
const noResize = rest[0] === "--no-resize";
const names = noResize ? rest.slice(1) : rest;
const { createReadToolDefinition } = await import(`${packages}/pi-coding-agent/dist/index.js`);
const read = createReadToolDefinition(dir, { autoResizeImages: !noResize });
const answers = {};
for (const name of names) {
  const { content } = await read.execute("read", { path: name });
  answers[name] = content.map((block) =>
    block.type === "image" ? { mimeType: block.mimeType, data: block.data } : block.text);
}
process.stdout.write(JSON.stringify(answers));
