/**
 * Text from sessions and the server as VS Code shows it: notifications and dialogs render
 * `[label](command:...)` as a link that runs the command, and quick picks and notifications render
 * `$(name)` as an icon; a zero-width space after `]` or `$` keeps both plain text.
 */
export function plain(text: string): string {
  return text.replace(/([\]$])\(/g, "$1\u200b(");
}
