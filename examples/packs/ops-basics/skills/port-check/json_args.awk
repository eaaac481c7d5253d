# json_args.awk - decode the args of a skill call (a flat JSON object) for a POSIX shell.
#
# Input: the whole of stdin, one JSON object whose members are scalars (string, number,
# true, false, null). Output, once the whole object has been parsed, one line per member:
#
#     KEY TYPE VALUE
#
#   KEY   the member name; only [A-Za-z0-9_]+ is accepted (skill arguments never need more)
#   TYPE  s = string, n = number, b = boolean, z = null
#   VALUE s: the decoded string re-encoded for `printf '%b'`: bytes [A-Za-z0-9._/+,:=@-] and
#            raw non-ASCII bytes as they are, every other byte as an octal escape \0ooo, so the
#            value never holds a blank, a quote or a backslash of its own (empty string = empty)
#         n: the number literal as written; b: true or false; z: null
#
# Anything else (invalid JSON, a nested object or array, a NUL character, a lone surrogate,
# trailing data) prints one message on stderr and exits with status 2, printing nothing.
# Works with mawk, gawk and busybox awk; run it with LC_ALL=C.

BEGIN {
    for (i = 1; i < 32; i++) CTRL[sprintf("%c", i)] = i
    CTRL[sprintf("%c", 127)] = 127
    for (i = 32; i < 127; i++) {
        c = sprintf("%c", i)
        ORD[c] = i
        CHR[i] = c
    }
    ESC["\""] = 34; ESC["\\"] = 92; ESC["/"] = 47
    ESC["b"] = 8; ESC["f"] = 12; ESC["n"] = 10; ESC["r"] = 13; ESC["t"] = 9
}

{ text = (NR == 1) ? $0 : text "\n" $0 }

function fail(msg) {
    printf "invalid JSON args: %s\n", msg > "/dev/stderr"
    exit 2
}

function peek() { return substr(text, pos, 1) }

function skip_ws(   c) {
    while (pos <= len) {
        c = substr(text, pos, 1)
        if (c != " " && c != "\t" && c != "\n" && c != "\r") return
        pos++
    }
}

function expect(c, what) {
    skip_ws()
    if (peek() != c) fail("expected " what " at character " pos)
    pos++
}

function hex4(   h, v, i, d) {
    h = substr(text, pos, 4)
    if (h !~ /^[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]$/)
        fail("bad \\u escape at character " pos)
    v = 0
    for (i = 1; i <= 4; i++) {
        d = index("0123456789abcdef", tolower(substr(h, i, 1))) - 1
        v = v * 16 + d
    }
    pos += 4
    return v
}

# Append one byte (0-255) to the string being decoded.
function put_byte(b) {
    if (b >= 32 && b < 127) {
        put_ascii(CHR[b])
    } else {
        out = out sprintf("\\0%03o", b)
        raw = raw "?"
    }
}

function put_ascii(c) {
    if (c ~ /[A-Za-z0-9._\/+,:=@-]/) out = out c
    else out = out sprintf("\\0%03o", ORD[c])
    raw = raw c
}

# Append one Unicode code point, UTF-8 encoded.
function put_codepoint(cp) {
    if (cp < 128) {
        put_byte(cp)
    } else if (cp < 2048) {
        put_byte(192 + int(cp / 64)); put_byte(128 + cp % 64)
    } else if (cp < 65536) {
        put_byte(224 + int(cp / 4096)); put_byte(128 + int(cp / 64) % 64)
        put_byte(128 + cp % 64)
    } else {
        put_byte(240 + int(cp / 262144)); put_byte(128 + int(cp / 4096) % 64)
        put_byte(128 + int(cp / 64) % 64); put_byte(128 + cp % 64)
    }
}

# Parse the string starting at pos (an opening quote): sets out (encoded) and raw (decoded,
# with "?" for anything outside printable ASCII).
function parse_string(   c, e, cp, lo) {
    pos++
    out = ""
    raw = ""
    for (;;) {
        if (pos > len) fail("unterminated string")
        c = substr(text, pos, 1)
        if (c == "\"") { pos++; return }
        if (c == "\\") {
            e = substr(text, pos + 1, 1)
            pos += 2
            if (e in ESC) {
                put_byte(ESC[e])
            } else if (e == "u") {
                cp = hex4()
                if (cp >= 55296 && cp < 56320) {
                    if (substr(text, pos, 2) != "\\u") fail("lone surrogate in string")
                    pos += 2
                    lo = hex4()
                    if (lo < 56320 || lo >= 57344) fail("lone surrogate in string")
                    cp = 65536 + (cp - 55296) * 1024 + (lo - 56320)
                } else if (cp >= 56320 && cp < 57344) {
                    fail("lone surrogate in string")
                }
                if (cp == 0) fail("NUL character in string")
                put_codepoint(cp)
            } else {
                fail("bad escape in string at character " (pos - 2))
            }
        } else if (c in CTRL) {
            fail("control character in string at character " pos)
        } else if (c in ORD) {
            put_ascii(c)
            pos++
        } else {
            out = out c  # a raw non-ASCII byte (or character): passed through untouched
            raw = raw "?"
            pos++
        }
    }
}

# Parse the scalar at pos: sets vtype and value.
function parse_value(   c, rest) {
    skip_ws()
    c = peek()
    if (c == "\"") {
        parse_string()
        vtype = "s"; value = out
    } else if (c == "{" || c == "[") {
        fail("nested objects and arrays are not supported")
    } else if (substr(text, pos, 4) == "true") {
        vtype = "b"; value = "true"; pos += 4
    } else if (substr(text, pos, 5) == "false") {
        vtype = "b"; value = "false"; pos += 5
    } else if (substr(text, pos, 4) == "null") {
        vtype = "z"; value = "null"; pos += 4
    } else {
        rest = substr(text, pos)
        if (!match(rest, /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?/))
            fail("unexpected character at " pos)
        vtype = "n"; value = substr(rest, 1, RLENGTH); pos += RLENGTH
    }
}

END {
    len = length(text)
    pos = 1
    n = 0
    skip_ws()
    if (peek() != "{") fail("the args must be a JSON object")
    pos++
    skip_ws()
    if (peek() == "}") {
        pos++
    } else {
        for (;;) {
            skip_ws()
            if (peek() != "\"") fail("expected a member name at character " pos)
            parse_string()
            if (raw !~ /^[A-Za-z0-9_]+$/) fail("unsupported argument name")
            key = raw
            expect(":", "':'")
            parse_value()
            lines[++n] = key " " vtype " " value
            skip_ws()
            c = peek()
            pos++
            if (c == "}") break
            if (c != ",") fail("expected ',' or '}' at character " (pos - 1))
        }
    }
    skip_ws()
    if (pos <= len) fail("trailing data after the object")
    for (i = 1; i <= n; i++) print lines[i]
}
