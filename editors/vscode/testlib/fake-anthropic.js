// A local Anthropic-compatible endpoint on 127.0.0.1 with scripted SSE replies (the Node twin
// of tests/fake_anthropic.py), so a whole agent turn runs with no network.
"use strict";
const http = require("node:http");

const messageStart = () => ({ type: "message_start", message: {
  id: "msg_fake", type: "message", role: "assistant", model: "claude-sonnet-4-5", content: [],
  stop_reason: null, stop_sequence: null,
  usage: { input_tokens: 100, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } } });

const messageEnd = (stop) => [
  { type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 20 } },
  { type: "message_stop" },
];

function textBlock(index, ...pieces) {
  return [
    { type: "content_block_start", index, content_block: { type: "text", text: "" } },
    ...pieces.map((text) => ({ type: "content_block_delta", index, delta: { type: "text_delta", text } })),
    { type: "content_block_stop", index },
  ];
}

function thinkingBlock(index, thinking) {
  return [
    { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } },
    { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking } },
    { type: "content_block_delta", index, delta: { type: "signature_delta", signature: "c2ln" } },
    { type: "content_block_stop", index },
  ];
}

function toolBlock(index, id, name, input) {
  const json = JSON.stringify(input);
  const half = Math.floor(json.length / 2);
  return [
    { type: "content_block_start", index, content_block: { type: "tool_use", id, name, input: {} } },
    { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: json.slice(0, half) } },
    { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: json.slice(half) } },
    { type: "content_block_stop", index },
  ];
}

const textReply = (...pieces) => ({ events: [messageStart(), ...textBlock(0, ...pieces), ...messageEnd("end_turn")] });
const toolReply = ({ thinking, text, calls }) => {
  const events = [messageStart()];
  let i = 0;
  if (thinking) events.push(...thinkingBlock(i++, thinking));
  if (text) events.push(...textBlock(i++, text));
  for (const [id, name, input] of calls) events.push(...toolBlock(i++, id, name, input));
  return { events: [...events, ...messageEnd("tool_use")] };
};

/** `reply` stopping after its first `after` events until `release()`: what a test does meanwhile
 *  happens while the turn runs, however slow the machine. */
function held(reply, after) {
  let release;
  reply.held = { after, until: new Promise((resolve) => (release = resolve)) };
  return { reply, release };
}

/** A request the server refuses: `status` with Anthropic's error body. */
const errorReply = (status, type, message) => ({ status, error: { type, message } });

class FakeAnthropic {
  constructor() {
    this.replies = [];
    this.requests = [];
    this.server = http.createServer((req, res) => this.answer(req, res));
  }
  start() {
    return new Promise((resolve) => this.server.listen(0, "127.0.0.1", () => {
      this.url = `http://127.0.0.1:${this.server.address().port}`;
      resolve(this.url);
    }));
  }
  stop() {
    this.server.closeAllConnections?.();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
  script(...replies) {
    this.replies = replies;
    this.requests = [];
  }
  answer(req, res) {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      this.requests.push({ method: req.method, path: req.url, body: body ? JSON.parse(body) : {} });
      const reply = this.replies.shift();
      if (!reply) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: "the fake server has no scripted reply left" } }));
        return;
      }
      if (reply.status) {
        res.writeHead(reply.status, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: reply.error }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      for (const [index, event] of reply.events.entries()) {
        if (index === reply.held?.after) await reply.held.until;
        res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
        if (reply.delay) await new Promise((r) => setTimeout(r, reply.delay));
      }
      res.end();
    });
  }
}

module.exports = { FakeAnthropic, errorReply, held, textReply, toolReply };
