/**
 * The redaction that QueueBox applies to every log line and every `last_error` value: one rule
 * set for the server and every pull client, pinned by `testdata/redaction/corpus.json` of the
 * QueueBox repository. Each rule is the regular expression of `testdata/redaction/README.md`,
 * run over the whole text from left to right.
 *
 * Three definitions make every language agree: a character is a Unicode code point (not a
 * UTF-16 code unit); whitespace is space, `\t`, `\n`, `\v`, `\f` and `\r` only; word
 * characters and letter case are ASCII only. JavaScript regular expressions without the `u`
 * flag give exactly that: `\w` and `\b` are ASCII, and the `i` flag never folds a non-ASCII
 * letter (U+017F, the long s) onto an ASCII one.
 *
 * @module
 */

/** The largest number of characters (code points) that {@link sanitize} and {@link sanitizeError} return. */
export const MAX_ERROR_LENGTH = 2000;

/** The number of characters (code points) of input that {@link sanitize} examines. */
const MAX_INPUT = 2512;

/** The end of a result that was cut to {@link MAX_ERROR_LENGTH} characters. */
const TRUNCATION_MARKER = "...[truncated]";

/** The replacement of a secret value and of an authentication credential. */
const REDACTED = "[REDACTED]";

/** The largest number of errors of a cause chain that {@link sanitizeError} names. */
const MAX_LEVELS = 5;

/** The bound of the walk down a cause chain (a cause may point back to its own error). */
const MAX_WALK = 64;

/** Joins the levels of an error chain. */
const CAUSE_SEPARATOR = " | caused by ";

/** The secret-bearing keys of rule 2; "-", "_" and "." between words stand for any of them or none. */
const SECRET_KEYS = [
  "authorization", "proxy-authorization", "x-api-key", "api-key", "apikey", "cookie",
  "set-cookie", "x-auth-token", "token", "access_token", "refresh_token", "client_secret",
  "secret", "password", "pwd", "passwd", "credential", "credentials", "passphrase",
  "private_key",
];

const KEY = SECRET_KEYS.map((key) => key.split(/[-_.]/).join("[-_.]?")).join("|");
const SCHEME = "basic|bearer|digest|negotiate|token";
const WS = "\\t\\n\\v\\f\\r ";
const QUOTED = `"(?:[^"\\\\\\r\\n]|\\\\[^\\r\\n])*"?|'(?:[^'\\\\\\r\\n]|\\\\[^\\r\\n])*'?`;

/** Rule 2: a secret-bearing key and its value. Group 1 is a value after "=", group 2 after ":". */
const PAIR = new RegExp(
  `\\b\\w*(?:${KEY})\\b["']?[ \\t]*(?:=[ \\t]*(${QUOTED}|(?:(?:${SCHEME})[ \\t]+)?[^${WS}]+)` +
    `|:[ \\t]*(${QUOTED}|\\[REDACTED\\]|[^${WS},;}\\]&"](?:[^,;}\\]&"\\r\\n]*[^${WS},;}\\]&"])?))`,
  "gi",
);

/** Rule 3: the user information of a URL; the last "@" of the authority wins. */
const USER_INFO = new RegExp(
  `([A-Za-z][A-Za-z0-9+.\\-]*://)(?:[^${WS}/?#"]+|[^${WS}/?#@:"]*:` +
    `(?:[^${WS}/?#@:"]*[^${WS}/?#@:"0-9][^${WS}/?#@:"]*)?[/?#][^${WS}"]*)@`,
  "g",
);

/** Rule 4: an authentication scheme followed by a credential-like token. */
const SCHEME_CREDENTIAL = new RegExp(
  `\\b(${SCHEME})[ \\t]+(?:[A-Za-z0-9._~+/\\-]*[0-9][A-Za-z0-9._~+/=\\-]*` +
    `|[A-Za-z0-9._~+/\\-]+=[A-Za-z0-9._~+/=\\-]*|[A-Za-z0-9._~+/\\-][A-Za-z0-9._~+/=\\-]{15,})`,
  "gi",
);

/** Rule 5: the value of a secret query parameter. */
const QUERY = new RegExp(`([?&](?:password|pwd|secret|token)=)[^&#"${WS}]+`, "gi");

/**
 * Returns `text` with every secret that the QueueBox rules recognise replaced, cut to at most
 * {@link MAX_ERROR_LENGTH} characters (code points), the last of which then read
 * `...[truncated]`. Only the first 2 512 characters of the input are examined.
 *
 * @example
 * sanitize('POST failed: {"password":"hunter2"} via amqp://guest:guest@rabbit:5672/vh');
 * // 'POST failed: {"password":"[REDACTED]"} via amqp://***@rabbit:5672/vh'
 */
export function sanitize(text: string): string {
  let s = limitCodePoints(String(text), MAX_INPUT);
  s = s.replace(PAIR, (match: string, afterEquals: string | undefined, afterColon: string | undefined) => {
    const value = afterEquals ?? afterColon ?? "";
    return match.slice(0, match.length - value.length) + redactValue(value);
  });
  s = s.replace(USER_INFO, "$1***@");
  s = s.replace(SCHEME_CREDENTIAL, `$1 ${REDACTED}`);
  s = s.replace(QUERY, "$1***");
  return truncate(s);
}

/**
 * Returns the text of an error and of its causes (`error.cause`), outermost first, joined as
 * `outer | caused by inner`, at most five levels deep, passed through {@link sanitize}.
 *
 * Each level shows its own text: a message that ends with the message of its cause
 * (`new Error("dialing: " + inner.message, { cause: inner })`) shows only the part before it,
 * as the Go library does for wrapped errors. The text of an `Error` is its message (its name
 * when the message is empty); a string is itself; `null` and `undefined` give `""`; any other
 * value gives its JSON text, or `String(value)` when it has none.
 */
export function sanitizeError(error: unknown): string {
  if (error === undefined || error === null) {
    return "";
  }
  const parts: string[] = [];
  const seen = new Set<unknown>([error]);
  let current: unknown = error;
  let text = errorText(current);
  for (let steps = 0; current !== undefined && current !== null && parts.length < MAX_LEVELS && steps < MAX_WALK; steps++) {
    let next = causeOf(current);
    if (seen.has(next)) {
      next = undefined; // a cause that points back ends the chain
    }
    seen.add(next);
    const nextText = next === undefined || next === null ? "" : errorText(next);
    const own = ownText(text, nextText);
    if (own !== "") {
      parts.push(own);
    }
    current = next;
    text = nextText;
  }
  return sanitize(parts.join(CAUSE_SEPARATOR));
}

/** Keeps the first `limit` code points of `s`. */
function limitCodePoints(s: string, limit: number): string {
  // A string of at most `limit` UTF-16 units has at most `limit` code points.
  if (s.length <= limit) {
    return s;
  }
  let units = 0;
  let points = 0;
  while (units < s.length && points < limit) {
    const code = s.charCodeAt(units);
    units += code >= 0xd800 && code <= 0xdbff && units + 1 < s.length && isLowSurrogate(s.charCodeAt(units + 1)) ? 2 : 1;
    points++;
  }
  return s.slice(0, units);
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}

/** Rule 6: cuts a result longer than MAX_ERROR_LENGTH code points. */
function truncate(s: string): string {
  if (s.length <= MAX_ERROR_LENGTH) {
    return s;
  }
  const points = Array.from(s);
  if (points.length <= MAX_ERROR_LENGTH) {
    return s;
  }
  return points.slice(0, MAX_ERROR_LENGTH - Array.from(TRUNCATION_MARKER).length).join("") + TRUNCATION_MARKER;
}

/**
 * The replacement of a rule 2 value: a quoted value keeps its quotes (the closing one only when
 * it had one), an empty quoted value stays empty, any other value becomes [REDACTED].
 */
function redactValue(value: string): string {
  const quote = value[0];
  if (quote !== '"' && quote !== "'") {
    return REDACTED;
  }
  if (value.length === 2 && value[1] === quote) {
    return value;
  }
  return quote + REDACTED + (isClosed(value) ? quote : "");
}

/** Reports whether a quoted value that the rule 2 expression matched ends with its closing quote. */
function isClosed(value: string): boolean {
  const quote = value[0];
  for (let i = 1; i < value.length; i++) {
    if (value[i] === "\\") {
      i++;
    } else if (value[i] === quote) {
      return true;
    }
  }
  return false;
}

/** The own text of one level: `message` without the message of its cause at its end. */
function ownText(message: string, inner: string): string {
  if (inner === "" || !message.endsWith(inner)) {
    return message;
  }
  return message.slice(0, message.length - inner.length).replace(/[: \t\r\n]+$/, "");
}

/** The cause of an error-like value, or undefined. */
function causeOf(value: unknown): unknown {
  if (typeof value === "object" && value !== null && "cause" in value) {
    try {
      return (value as { cause?: unknown }).cause;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The text of one error-like value. */
function errorText(value: unknown): string {
  try {
    if (typeof value === "string") {
      return value;
    }
    if (value instanceof Error || (typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string")) {
      const { message, name } = value as { message: string; name?: unknown };
      return message !== "" ? message : typeof name === "string" ? name : "";
    }
    if (typeof value === "object" && value !== null) {
      const json = JSON.stringify(value);
      if (json !== undefined && json !== "{}") {
        return json;
      }
    }
    return String(value);
  } catch {
    return "!error while reading the error text";
  }
}
