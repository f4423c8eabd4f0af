/**
 * How deeply a YAML text nests collections, estimated from above without parsing it. The `yaml`
 * library composes nodes recursively: a few thousand levels (`{"a":{"a":…`, `- - - …`) exhaust the
 * stack, which it turns into an error, except when the stack runs out while V8 compiles one of the
 * library's regular expressions; that is a fatal error that ends the process. Request bodies are
 * therefore measured first, and a text nested deeper than any document of ours is refused unparsed.
 *
 * The estimate at any point is the sum of:
 * - the block levels: the distinct, increasing indentations of the enclosing lines (a sibling line
 *   replaces its predecessor, a shallower one closes the deeper ones);
 * - the compact indicators at the start of a line (`- - x`, `? - x`), each a level on one line;
 * - the open flow collections (`{` and `[` not yet closed), counted everywhere, inside quotes too.
 * Every real nesting is counted (brackets inside quoted text and block scalars can only add, and
 * the line a collection starts on may count once more), so a text under the limit nests no deeper
 * than the limit.
 */
export function yamlNestingExceeds(text: string, limit: number): boolean {
  const indents: number[] = [];
  let flow = 0;
  let start = 0;
  while (start <= text.length) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    let i = start;
    while (i < end && (text.charCodeAt(i) === 0x20 || text.charCodeAt(i) === 0x09)) i++;
    const indent = i - start;
    if (i < end && text.charCodeAt(i) !== 0x23 /* # */ && flow === 0) {
      while (indents.length > 0 && (indents[indents.length - 1] ?? 0) >= indent) indents.pop();
      indents.push(indent);
    }
    let compact = 0;
    while (i + 1 < end && isIndicator(text.charCodeAt(i)) && isBlank(text.charCodeAt(i + 1))) {
      compact++;
      i += 2;
      while (i < end && isBlank(text.charCodeAt(i))) i++;
    }
    if (indents.length + compact + flow > limit) return true;
    for (; i < end; i++) {
      const c = text.charCodeAt(i);
      if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
        flow++;
        if (indents.length + compact + flow > limit) return true;
      } else if ((c === 0x7d /* } */ || c === 0x5d) /* ] */ && flow > 0) {
        flow--;
      }
    }
    start = end + 1;
  }
  return false;
}

function isIndicator(c: number): boolean {
  return c === 0x2d /* - */ || c === 0x3f /* ? */ || c === 0x3a; /* : */
}

function isBlank(c: number): boolean {
  return c === 0x20 || c === 0x09;
}
