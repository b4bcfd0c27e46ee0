// The server's LSP surface as the client sees it (DESIGN.md, "LSP surface").
// Types only, plus method names: no vscode import, so tests and the webview can share it.

export const SESSIONS_CHANGED = "pi/sessionsChanged";
export const SESSION_CHANGED = "pi/sessionChanged";
export const TURN = "pi/turn";
export const JOB_DONE = "pi/jobDone";
/** Server → client requests this extension answers (announced in capabilities.experimental.piLsp). */
export const APPROVE_TOOL = "pi/approveTool";
export const DIAGNOSTICS = "pi/diagnostics";

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];
export type Layer = "agent" | "llm" | "request";
export type Delivery = "prompt" | "steer" | "followUp";

export interface SessionInfo {
  uri: string;
  id: string;
  name: string | null;
  cwd: string;
  created: string;
  modified: string;
  entryCount: number;
  firstMessage: string | null;
  parentSession: string | null;
  /** What to call the session: its name, else its first prompt (cut), else its file name. */
  title: string;
}

/** One row of the tree as the server lays it out (pi_lsp/session/layout.py), in drawing order. */
export interface TreeNode {
  id: string;
  parentId: string | null;
  /** Forks above the row: a chain stays at one depth, each branch of a fork is one deeper. */
  depth: number;
  /** The first entry of a branch (a fork's child, or one of several roots). */
  head: boolean;
  type: string;
  role: string | null;
  preview: string;
  label: string | null;
  timestamp: string | null;
  onPath: boolean;
  /** Rows folded under this one (a branch off the path, or the rows past the leaf): `under` fetches them. */
  hidden: number;
  /** Its fork's branches after it that were not sent (a fork with very many): `after` fetches them. */
  moreBranches: number;
  /** The rows those branches make. */
  moreRows: number;
}

export interface TreeResult {
  /** Unique across sessions; pi/sessionChanged's `tree` patches this version only. */
  version: number;
  leafId: string | null;
  /** The row marked as the leaf: the leaf, or the row above it when the leaf is a hidden entry. */
  leafRow: string | null;
  title: string;
  /** Entries in the file (rows leave out usage records and bookkeeping). */
  entries: number;
  nodes: TreeNode[];
  /** Rows before the first one sent (a `limit` was given): a larger `limit` shows them. */
  earlier: number;
}

/** A page of the rows folded under the row `under`, in drawing order. */
export interface RowsUnder {
  under: string;
  start: number;
  total: number;
  nodes: TreeNode[];
}

/** A page of the branches left out after the row `after`, each folded. */
export interface BranchesAfter {
  after: string;
  start: number;
  total: number;
  /** The rows all `total` branches make. */
  rows: number;
  nodes: TreeNode[];
}

export interface PreviewMessage {
  entryId: string | null;
  role: string;
  tokens: number;
  message: AgentMessage;
  /** A context edit replaced its content. */
  edited?: boolean;
}

/** A context edit in force (pi_lsp/context/edits.py EditMark). */
export interface EditMark {
  targetId: string;
  editId: string;
  kind: "omitted" | "replaced";
  role: string;
  tokensBefore: number;
  tokensAfter: number;
  original: string;
  /** Where its target stands among the preview's messages. */
  position: number;
  /** A failed or aborted reply's `[error] <its error>` and calls, not cut to a line: why it failed. */
  failure?: string | null;
}

/** Messages of a paged preview, from the one at `start` in the whole context. */
export interface PreviewPage {
  start: number;
  messages: PreviewMessage[];
}

/** A message's heading in a preview's `markdown` (its 0-based line): what its edits act on. */
export interface PreviewHeading {
  line: number;
  /** null: a message of no entry (it cannot be edited). */
  entryId: string | null;
  role: string;
  state: "kept" | "replaced" | "removed";
}

export interface PreviewResult {
  leafId: string | null;
  layer: Layer;
  model: string | null;
  thinkingLevel: string;
  /** The levels the model offers, as pi's picker shows them. */
  thinkingLevels: ThinkingLevel[];
  messages: PreviewMessage[];
  totalTokens: number;
  contextWindow: number;
  markdown: string;
  edits?: EditMark[];
  headings?: PreviewHeading[];
  /** With `page`: the whole context's length, and its first and last pages (one when they meet). */
  totalMessages?: number;
  pages?: PreviewPage[];
}

export interface DiffResult {
  onlyFrom: string[];
  onlyTo: string[];
  fromTokens: number;
  toTokens: number;
  /** The leaf compared with: the one asked for, else the current one. */
  toLeafId: string;
}

export interface BranchResult {
  leafId: string | null;
  editorText?: string | null;
  /** How many files differ from the state recorded at the new leaf (0 when none is). */
  fileChanges?: number;
  /** How many paths a restore to the new leaf would leave alone (skipped, refused, unrecorded). */
  leftAlone?: number;
}

/** What a restore would do to one file: `added` comes back, `deleted` goes. */
export interface FileChange {
  path: string;
  status: "added" | "modified" | "deleted";
  diff: string;
}

/** The paths a restore leaves alone (pi_lsp/files/history.py), each left out when empty. */
export interface LeftAlone {
  /** Not snapshotted (too large, unreadable, ignored), or listed in `why`. */
  skipped?: string[];
  /** Under .git/ or .pi/, or behind a symlink. */
  refused?: string[];
  /** Path -> why it is left alone, in words: a nested git repository, a file in the way, an
   * open file whose unsaved text no snapshot can hold. */
  why?: Record<string, string>;
  /** The git repositories inside the workspace, whose files no snapshot records. */
  unrecorded?: string[];
}

export interface FileChangesResult extends LeftAlone {
  available: boolean;
  /** Left out when no file differs. */
  files?: FileChange[];
  reason?: string;
}

export interface RestoreResult extends LeftAlone {
  files: FileChange[];
  undoId: string;
  skipped: string[];
  /** Files open in the editor: restored there through workspace/applyEdit, not saved. */
  inEditor?: string[];
}

export interface CompactPlan {
  firstKeptEntryId: string;
  isSplitTurn: boolean;
  tokensBefore: number;
  previousSummary: string | null;
  messagesToSummarize: number;
  turnPrefixMessages: number;
  readFiles: string[];
  modifiedFiles: string[];
}

export interface Problem {
  kind: string;
  message: string;
  line?: number;
  entryId?: string;
  /** Past the first 1,000 of a kind: how many more of it this one counts, not listed. */
  more?: number;
}

/** Every command: its one object argument and its result. */
/** Whether a folder's own .pi/ files are loaded, and why (pi_lsp/trust.py). */
export interface TrustState {
  folderUri: string;
  trusted: boolean;
  decision: "override" | "restricted" | "session" | "saved" | "client" | "default" | "undecided" | "noProjectFiles" | "error";
  projectFiles: string[];
  savedPath?: string;
  error?: string;
}

export interface Commands {
  "pi.listSessions": [Record<string, never>, { sessions: SessionInfo[] }];
  "pi.newSession": [{ name?: string; folderUri?: string }, { uri: string }];
  /** With `under`, the answer is a RowsUnder page instead; with `after`, a BranchesAfter page. */
  "pi.getTree": [{ uri: string; limit?: number; under?: string; after?: string; start?: number }, TreeResult];
  /** With `page`, `messages` is left out: `pages` holds the first and last `page` messages. */
  "pi.previewContext": [{ uri: string; leafId?: string; layer?: Layer; page?: number; start?: number; entryId?: string }, PreviewResult];
  "pi.diffContext": [{ uri: string; fromLeafId: string; toLeafId?: string }, DiffResult];
  "pi.branch": [{ uri: string; targetId: string; edit?: boolean }, BranchResult];
  "pi.branchWithSummary": [{ uri: string; targetId: string; instructions?: string }, { jobId: string }];
  /** A dry run that would refuse answers `plan: null` and the refusal's own words in `reason`. */
  "pi.compact": [{ uri: string; instructions?: string; dryRun?: boolean }, { plan?: CompactPlan | null; reason?: string; jobId?: string }];
  "pi.label": [{ uri: string; targetId: string; label: string | null }, Record<string, never>];
  "pi.fork": [{ uri: string; leafId?: string }, { uri: string }];
  /** `queued`: written when the running turn ends. */
  "pi.setName": [{ uri: string; name: string }, { queued: boolean }];
  "pi.setModel": [{ uri: string; provider: string; modelId: string }, Record<string, never>];
  /** `level`: the one recorded, clamped to the model as pi does; `queued`: behind the running turn,
   *  `level` null then (the model in force at the turn's end decides it). */
  "pi.setThinkingLevel": [{ uri: string; level: ThinkingLevel }, { level: ThinkingLevel | null; written: boolean; queued: boolean }];
  "pi.prompt": [{ uri: string; text: string; delivery?: Delivery; context?: CodeContext[] }, { turnId: string | null; promptId?: string; queued?: Delivery; dropped?: Delivery }];
  "pi.prepareTurn": [{ uri: string }, { provider: string; model: string }];
  "pi.abort": [{ uri: string }, { aborted: boolean }];
  "pi.check": [{ uri: string }, { problems: Problem[] }];
  "pi.editContext": [{ uri: string; targetId: string; replacement: { content: string } | null }, { editId: string }];
  "pi.undoContextEdit": [{ uri: string; targetId: string }, { editId: string }];
  "pi.fileChanges": [{ uri: string; entryId: string }, FileChangesResult];
  "pi.restoreFiles": [{ uri: string; entryId?: string; undoId?: string }, RestoreResult];
  "pi.listModels": [Record<string, never>, { models: ModelInfo[]; default: string }];
  "pi.trustStatus": [Record<string, never>, { folders: TrustState[] }];
  "pi.setTrust": [{ folderUri: string; trusted: boolean | null; save?: boolean; parent?: boolean }, TrustState];
}

/** A model the server knows: built in, or from pi's models.json. */
export interface ModelInfo {
  provider: string;
  id: string;
  name: string;
  api: string;
  reasoning: boolean;
  input: string[];
  contextWindow: number;
  maxTokens: number;
}
export type CommandName = keyof Commands;
export type ArgsOf<K extends CommandName> = Commands[K][0];
export type ResultOf<K extends CommandName> = Commands[K][1];

/** Code sent with a prompt: a selection (text and range) or a whole file (uri only). */
export interface CodeContext {
  uri: string;
  text?: string;
  range?: LspRange;
  languageId?: string;
}

export interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

// -- server → client requests -----------------------------------------------------------

/** `pi/approveTool`: a write/edit carries the whole proposed text, bash its whole command. */
export interface ApproveToolParams {
  uri: string;
  turnId: string;
  toolCallId: string;
  tool: string;
  title: string;
  command?: string;
  path?: string;
  outsideWorkspace: boolean;
  /** false: "allow for this session" would not be remembered for this call, so it is not
   * offered; older servers leave it out (offered). */
  allowForSession?: boolean;
  /** What "allow for this session" covers outside the workspace: this folder and below, or
   * `path` alone; unset where it covers the tool in the whole workspace. */
  sessionScope?: string;
  /** true: a file attached to a prompt (not a tool call of `turnId`'s turn), whose question
   * outlives that turn. */
  attachment?: boolean;
  oldText?: string | null;
  newText?: string;
  diff?: string;
}

export type ApprovalDecision = "allow" | "allowSession" | "deny";

export interface DiagnosticsParams {
  uris: string[];
}

export interface DiagnosticItem {
  range: LspRange;
  severity: number;
  message: string;
  source?: string;
}

export interface DiagnosticsResult {
  diagnostics: { uri: string; items: DiagnosticItem[] }[];
}

// -- notifications ----------------------------------------------------------------------

export interface SessionChanged {
  uri: string;
  entries: number;
  leafId: string | null;
  reloaded: boolean;
  /** The session's title (its name, else its first prompt, else its file name). */
  title: string;
  /** How the tree changed, when the server holds the tree an editor shows. */
  tree?: TreeDelta;
  /** The session's file was replaced by another program (cut short): it goes on in `uri`. */
  relocatedFrom?: string;
}

/** A session that goes on in another file, as relocatedFrom or a session_moved event says. */
export interface SessionMove {
  from: string;
  to: string;
}

/** The tree at `version` is the one at `base` with `nodes[start, start + delete)` replaced by `rows`. */
export interface TreeDelta extends Omit<TreeResult, "nodes"> {
  base: number;
  start: number;
  delete: number;
  rows: TreeNode[];
}

export interface TurnNotification {
  uri: string;
  turnId: string;
  event: TurnEvent;
}

export interface JobDone {
  jobId: string;
  uri: string;
  ok: boolean;
  result?: unknown;
  error?: string;
}

// -- messages and turn events (pi's names; only the fields the client reads) ------------

export interface ContentBlock {
  type: string;
  text?: string;
  thinking?: string;
  id?: string;
  name?: string;
  arguments?: unknown;
  mimeType?: string;
}

export interface AgentMessage {
  role: string;
  content?: string | ContentBlock[];
  /** ms since the epoch; null where pi wrote NaN. */
  timestamp?: number | null;
  // assistant
  model?: string;
  stopReason?: string;
  errorMessage?: string | null;
  // toolResult
  toolCallId?: string;
  toolName?: string;
  isError?: boolean;
  // bashExecution
  command?: string;
  output?: string;
  exitCode?: number | null;
  // branchSummary / compactionSummary
  summary?: string;
  tokensBefore?: number;
  // custom
  customType?: string;
  display?: boolean;
}

export interface StreamDelta {
  type: "text_delta" | "thinking_delta" | "toolcall_delta" | "block_end" | string;
  contentIndex: number;
  delta?: string;
}

export type TurnEvent =
  | { type: "agent_start" | "turn_start" | "turn_end" | "save_point" }
  | { type: "message_start"; message: AgentMessage }
  /** `entryId`: the entry the message was written as. */
  | { type: "message_end"; message: AgentMessage; entryId?: string | null }
  | { type: "message_update"; deltas: StreamDelta[] }
  | { type: "tool_execution_start"; toolCallId: string; toolName: string; args: unknown }
  | { type: "tool_execution_update"; toolCallId: string; toolName: string; partialResult: string }
  | { type: "tool_execution_end"; toolCallId: string; toolName: string; result: AgentMessage; isError: boolean }
  | { type: "agent_end"; messages?: AgentMessage[] }
  | { type: "error"; message: string }
  | { type: "queue_dropped"; steering: string[]; followUp: string[] }
  | { type: "compaction_start"; reason: string }
  | { type: "auto_retry_start"; attempt: number; maxAttempts: number; delayMs: number; errorMessage: string }
  | { type: "auto_retry_end"; success: boolean; attempt: number; finalError?: string | null }
  | { type: "session_moved"; replacedPath: string; path: string }
  | { type: "compaction_end"; entryId: string | null; error?: string | null; aborted?: boolean; willRetry?: boolean };
