/* The direct scanner: trace bytes straight into the staging columns, without ijson.
 *
 * Included by _fastshred.c (one translation unit; it uses the buffers, columns and
 * the exact-nanosecond conversion there). Shredder.scan(read, limit, slow) pulls the
 * decompressed document from read() and walks its grammar itself:
 *
 * - every element of traceEvents is first skipped by a strict validating scan
 *   (RFC 8259 grammar, UTF-8 checked, escapes checked, no lone surrogates, numbers
 *   of at most 1000 characters); then, being known valid and complete, it is read a
 *   second time by scan_event, which stages it exactly as shred_one stages the dict
 *   ijson would have built from it (same typing rules, the same args JSON: keys in
 *   order, strings re-escaped as json_str does, ints as int64 digits, other numbers
 *   as the float closest to them);
 * - an element it does not stage (not an ordinary event, a key with an escape, a
 *   duplicate key, a value of another type, too deep...) comes back as its bytes
 *   with its index; the caller parses those with ijson and hands them to the pure
 *   path, exactly as before;
 * - anything it is not sure about at the document level (malformed JSON, invalid
 *   UTF-8, an escaped lone surrogate, a truncated document, traceEvents missing,
 *   twice or not an array, an escaped top-level key, a number too long for Python's
 *   int(), whitespace other than JSON's four, a byte order mark...) makes scan()
 *   return 2: the caller discards what it staged and stages the part again through
 *   ijson, so every error is reported exactly as the ijson path reports it.
 *
 * Nothing of an element is appended before it is decided, so a slow element costs
 * only its bytes.
 */

enum { D_START, D_KEY_FIRST, D_KEY, D_MEMBER_END, D_EV_FIRST, D_EV_NEXT, D_EV_ITEM, D_END };

#define MAX_NUMBER 1000   /* longer number tokens: the ijson path decides (int() limits) */
#define MAX_KEYS 512      /* an object with more keys goes to the pure path */

/* ------------------------------------------------------------------ lexing */

static inline size_t sc_ws(const unsigned char *s, size_t i, size_t n) {
    while (i < n) {
        unsigned char c = s[i];
        if (c == ' ') {
            i++;
            /* pretty-printed traces indent deeply: eight spaces at a time */
            uint64_t w;
            while (i + 8 <= n && (memcpy(&w, s + i, 8), w == 0x2020202020202020ULL)) i += 8;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            i++;
        } else {
            break;
        }
    }
    return i;
}

/* Bytes a string scan stops at: '"', '\\', controls, and non-ASCII (UTF-8 checked). */
static unsigned char STR_STOP[256];

static void str_stop_init(void) {
    for (int c = 0; c < 256; c++)
        STR_STOP[c] = (unsigned char)(c < 0x20 || c >= 0x80 || c == '"' || c == '\\');
}

static inline int sc_delim(unsigned char c) {
    return c == ',' || c == ']' || c == '}' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static inline int hex4(const unsigned char *s, unsigned *out) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(s[k]);
        if (h < 0) return -1;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 0;
}

/* A UTF-8 sequence at s: its length, 0 incomplete, -1 invalid (overlong, surrogate, ...). */
static inline int utf8_len(const unsigned char *s, size_t avail) {
    unsigned c = s[0], cp, min;
    int len;
    if (c < 0xC2) return -1;
    if (c < 0xE0) { len = 2; cp = c & 0x1F; min = 0x80; }
    else if (c < 0xF0) { len = 3; cp = c & 0x0F; min = 0x800; }
    else if (c < 0xF5) { len = 4; cp = c & 0x07; min = 0x10000; }
    else return -1;
    if (avail < (size_t)len) return 0;
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[k] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
    return len;
}

/* A string at s[i] == '"': 1 complete (*j past its closing quote, *esc: it has a
 * backslash), 0 incomplete, -1 invalid. */
static int skip_string(const unsigned char *s, size_t i, size_t n, size_t *j, int *esc) {
    int e = 0;
    i++;
    for (;;) {
        while (i < n && !STR_STOP[s[i]]) i++;
        if (i >= n) return 0;
        unsigned char c = s[i];
        if (c == '"') {
            *j = i + 1;
            *esc = e;
            return 1;
        }
        if (c == '\\') {
            e = 1;
            if (i + 1 >= n) return 0;
            unsigned char x = s[i + 1];
            if (x == 'u') {
                unsigned cp, lo;
                if (i + 6 > n) return 0;
                if (hex4(s + i + 2, &cp) < 0) return -1;
                i += 6;
                if (cp >= 0xDC00 && cp <= 0xDFFF) return -1;  /* lone low surrogate */
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (i + 6 > n) return 0;
                    if (s[i] != '\\' || s[i + 1] != 'u' || hex4(s + i + 2, &lo) < 0 ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return -1;
                    i += 6;
                }
                continue;
            }
            if (x == '"' || x == '\\' || x == '/' || x == 'b' || x == 'f' || x == 'n' ||
                x == 'r' || x == 't') {
                i += 2;
                continue;
            }
            return -1;
        }
        if (c < 0x20) return -1;
        int r = utf8_len(s + i, n - i);
        if (r <= 0) return r;
        i += (size_t)r;
    }
}

/* A number at s[i]: 1 complete (*j past it, *isint: no fraction or exponent), 0 it runs
 * to the end of the input, -1 invalid. */
static int skip_number(const unsigned char *s, size_t i, size_t n, size_t *j, int *isint) {
    size_t k = i;
    int integer = 1;
    if (s[k] == '-' && ++k >= n) return 0;
    if (s[k] == '0') k++;
    else if (s[k] >= '1' && s[k] <= '9') while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    else return -1;
    if (k >= n) return 0;
    if (s[k] == '.') {
        integer = 0;
        if (++k >= n) return 0;
        if (s[k] < '0' || s[k] > '9') return -1;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k >= n) return 0;
    }
    if (s[k] == 'e' || s[k] == 'E') {
        integer = 0;
        if (++k >= n) return 0;
        if ((s[k] == '+' || s[k] == '-') && ++k >= n) return 0;
        if (s[k] < '0' || s[k] > '9') return -1;
        while (k < n && s[k] >= '0' && s[k] <= '9') k++;
        if (k >= n) return 0;
    }
    if (!sc_delim(s[k]) || k - i > MAX_NUMBER) return -1;
    *j = k;
    *isint = integer;
    return 1;
}

/* true/false/null at s[i]: 1 (*j past it), 0 incomplete, -1 invalid. */
static int skip_literal(const unsigned char *s, size_t i, size_t n, size_t *j) {
    const char *word = s[i] == 't' ? "true" : s[i] == 'f' ? "false" : "null";
    size_t len = strlen(word);
    if (i + len >= n) return 0;  /* and the delimiter after it */
    if (memcmp(s + i, word, len) != 0 || !sc_delim(s[i + len])) return -1;
    *j = i + len;
    return 1;
}

static inline int stack_push(Buf *st, char c) { return buf_putc(st, c); }

/* One JSON value at s[i] (not whitespace), validated: 1 complete (*end past it), 0 it
 * goes on past n, -1 invalid, -2 out of memory. */
static int skip_value(Scan *sc, const unsigned char *s, size_t i, size_t n, size_t *end) {
    Buf *st = &sc->stack;
    st->len = 0;
    size_t j;
    int r, flag;
    for (;;) {
        /* a value */
        i = sc_ws(s, i, n);
        if (i >= n) return 0;
        unsigned char c = s[i];
        if (c == '{') {
            if (stack_push(st, '{') < 0) return -2;
            i = sc_ws(s, i + 1, n);
            if (i >= n) return 0;
            if (s[i] == '}') { st->len--; i++; goto after; }
            goto key;
        }
        if (c == '[') {
            if (stack_push(st, '[') < 0) return -2;
            i = sc_ws(s, i + 1, n);
            if (i >= n) return 0;
            if (s[i] == ']') { st->len--; i++; goto after; }
            continue;
        }
        if (c == '"') r = skip_string(s, i, n, &j, &flag);
        else if (c == '-' || (c >= '0' && c <= '9')) r = skip_number(s, i, n, &j, &flag);
        else if (c == 't' || c == 'f' || c == 'n') r = skip_literal(s, i, n, &j);
        else return -1;
        if (r <= 0) return r;
        i = j;
    after:
        if (st->len == 0) {
            *end = i;
            return 1;
        }
        i = sc_ws(s, i, n);
        if (i >= n) return 0;
        {
            char top = st->p[st->len - 1];
            if (s[i] == ',') {
                i++;
                if (top == '[') continue;
                goto key;
            }
            if ((top == '{' && s[i] == '}') || (top == '[' && s[i] == ']')) {
                st->len--;
                i++;
                goto after;
            }
            return -1;
        }
    key:
        i = sc_ws(s, i, n);
        if (i >= n) return 0;
        if (s[i] != '"') return -1;
        r = skip_string(s, i, n, &j, &flag);
        if (r <= 0) return r;
        i = sc_ws(s, j, n);
        if (i >= n) return 0;
        if (s[i] != ':') return -1;
        i++;
    }
}

/* ------------------------------------------------------------------ tokens */

enum { J_NONE = 0, J_STR, J_INT, J_DEC, J_TRUE, J_FALSE, J_NULL, J_OBJ, J_ARR };

typedef struct {
    const unsigned char *p;  /* J_STR: the content between the quotes; else the token */
    size_t len;
    int type, esc;
} Tok;

/* End of a container at s[i] ('{' or '['), the input known valid. */
static size_t skip_container(const unsigned char *s, size_t i) {
    int depth = 0;
    for (;;) {
        unsigned char c = s[i];
        if (c == '"') {
            i++;
            while (s[i] != '"') i += s[i] == '\\' ? 2 : 1;
            i++;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
        i++;
    }
}

/* The value at s[i] (valid input) as a token; returns the offset past it. */
static size_t read_tok(const unsigned char *s, size_t i, size_t n, Tok *t) {
    size_t j = i;
    int flag = 0;
    unsigned char c = s[i];
    t->esc = 0;
    if (c == '"') {
        skip_string(s, i, n, &j, &flag);
        t->type = J_STR;
        t->p = s + i + 1;
        t->len = j - i - 2;
        t->esc = flag;
        return j;
    }
    if (c == '{' || c == '[') {
        j = skip_container(s, i);
        t->type = c == '{' ? J_OBJ : J_ARR;
    } else if (c == 't') { j = i + 4; t->type = J_TRUE; }
    else if (c == 'f') { j = i + 5; t->type = J_FALSE; }
    else if (c == 'n') { j = i + 4; t->type = J_NULL; }
    else {
        skip_number(s, i, n, &j, &flag);
        t->type = flag ? J_INT : J_DEC;
    }
    t->p = s + i;
    t->len = j - i;
    return j;
}

/* The decoded UTF-8 of a string token with escapes, into b. 0 ok, -1 out of memory. */
static int decode_str(const Tok *t, Buf *b) {
    b->len = 0;
    if (buf_grow(b, t->len) < 0) return -1;
    const unsigned char *s = t->p;
    size_t i = 0, n = t->len;
    while (i < n) {
        unsigned char c = s[i];
        if (c != '\\') { b->p[b->len++] = (char)c; i++; continue; }
        unsigned char x = s[i + 1];
        char out = 0;
        switch (x) {
            case '"': out = '"'; break;
            case '\\': out = '\\'; break;
            case '/': out = '/'; break;
            case 'b': out = '\b'; break;
            case 'f': out = '\f'; break;
            case 'n': out = '\n'; break;
            case 'r': out = '\r'; break;
            case 't': out = '\t'; break;
            default: break;
        }
        if (x != 'u') { b->p[b->len++] = out; i += 2; continue; }
        unsigned cp = 0, lo = 0;
        hex4(s + i + 2, &cp);
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            hex4(s + i + 2, &lo);
            i += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        /* an escape is 6 or 12 bytes and writes at most 4: the buffer is large enough */
        char *p = b->p + b->len;
        if (cp < 0x80) { p[0] = (char)cp; b->len += 1; }
        else if (cp < 0x800) {
            p[0] = (char)(0xC0 | (cp >> 6)); p[1] = (char)(0x80 | (cp & 0x3F)); b->len += 2;
        } else if (cp < 0x10000) {
            p[0] = (char)(0xE0 | (cp >> 12)); p[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
            p[2] = (char)(0x80 | (cp & 0x3F)); b->len += 3;
        } else {
            p[0] = (char)(0xF0 | (cp >> 18)); p[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
            p[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); p[3] = (char)(0x80 | (cp & 0x3F));
            b->len += 4;
        }
    }
    return 0;
}

/* A string field: absent/null -> NULL; a string -> its UTF-8; 1 ok, 0 another type, -1. */
static int tok_str(const Tok *t, Buf *dec, const char **s, Py_ssize_t *len) {
    if (t->type == J_NONE || t->type == J_NULL) { *s = NULL; *len = 0; return 1; }
    if (t->type != J_STR) return 0;
    if (!t->esc) { *s = (const char *)t->p; *len = (Py_ssize_t)t->len; return 1; }
    if (decode_str(t, dec) < 0) return -1;
    *s = dec->p ? dec->p : "";
    *len = (Py_ssize_t)dec->len;
    return 1;
}

/* An int token in int64: 1 ok, 0 not (beyond int64 or not an int token). */
static int tok_i64(const Tok *t, int64_t *out) {
    if (t->type != J_INT) return 0;
    const unsigned char *s = t->p;
    size_t i = 0, n = t->len;
    int neg = s[0] == '-';
    if (neg) i++;
    uint64_t acc = 0;
    const uint64_t cap = neg ? (uint64_t)1 << 63 : ((uint64_t)1 << 63) - 1;
    for (; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (acc > (cap - d) / 10) return 0;
        acc = acc * 10 + d;
    }
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 1;
}

/* An optional int64 field: 1 ok (*ok: present, not null), 0 another type. */
static inline int tok_opt_i64(const Tok *t, int64_t *out, int *ok) {
    if (t->type == J_NONE || t->type == J_NULL) { *ok = 0; return 1; }
    *ok = 1;
    return tok_i64(t, out);
}

/* zlib's CRC-32 (the pure path hashes a string id with zlib.crc32). */
static uint32_t CRC_TABLE[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        CRC_TABLE[n] = c;
    }
}

static uint32_t crc32_of(const char *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = CRC_TABLE[(c ^ (unsigned char)p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* A pid or tid as rows._Ids types it: an int64 as it is; an int in [2**63, 2**64) (ROCm
 * queue handles) wrapped to int64, its digits the label; a string without ASCII digits
 * hashed to -(crc32(UTF-8) + 1), the string the label (a string with a digit may be a
 * number in quotes: the pure path decides). Null or absent: *ok 0. 1 ok, 0 the pure
 * path (bools, floats, other ints: anomalies), -1 error. */
static int tok_id(const Tok *t, Buf *dec, int64_t *out, int *ok, const char **label,
                  Py_ssize_t *label_len) {
    *label = NULL;
    *label_len = 0;
    if (t->type == J_NONE || t->type == J_NULL) { *ok = 0; return 1; }
    *ok = 1;
    if (t->type == J_INT) {
        if (tok_i64(t, out)) return 1;
        if (t->p[0] == '-' || t->len > 20) return 0;
        uint64_t acc = 0;
        for (size_t i = 0; i < t->len; i++) {
            unsigned d = (unsigned)(t->p[i] - '0');
            if (acc > (UINT64_MAX - d) / 10) return 0;  /* beyond uint64: id_out_of_range */
            acc = acc * 10 + d;
        }
        *out = (int64_t)(acc - ((uint64_t)1 << 63)) + INT64_MIN;  /* acc - 2**64 */
        *label = (const char *)t->p;
        *label_len = (Py_ssize_t)t->len;
        return 1;
    }
    if (t->type != J_STR) return 0;
    const char *s;
    Py_ssize_t len;
    int r = tok_str(t, dec, &s, &len);
    if (r <= 0) return r;
    for (Py_ssize_t i = 0; i < len; i++)
        if (s[i] >= '0' && s[i] <= '9') return 0;
    *out = -(int64_t)crc32_of(s, (size_t)len) - 1;
    *label = s;
    *label_len = len;
    return 1;
}

/* ts/dur as exact ns (as as_ns does): 1 ok, 0 not. */
static int tok_ns(const Tok *t, int64_t *out) {
    if (t->type == J_INT) {
        int64_t x;
        if (!tok_i64(t, &x)) return 0;
        if (x > INT64_MAX / 1000 || x < INT64_MIN / 1000) return 0;
        *out = x * 1000;
        return 1;
    }
    if (t->type == J_DEC) return decimal_text_ns((const char *)t->p, (Py_ssize_t)t->len, out);
    return 0;
}

/* A double from a number token (as as_f64 does for int and Decimal): 1 ok, 0 not, -1. */
static int tok_f64(const Tok *t, double *out) {
    if (t->type == J_INT) {
        int64_t x;
        if (!tok_i64(t, &x)) return 0;
        *out = (double)x;
        return 1;
    }
    if (t->type != J_DEC) return 0;
    char text[MAX_NUMBER + 1];
    memcpy(text, t->p, t->len);
    text[t->len] = '\0';
    char *end = NULL;
    double d = PyOS_string_to_double(text, &end, NULL);
    if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
    if (!end || *end != '\0' || !isfinite(d)) return 0;
    *out = d;
    return 1;
}

static inline int tok_opt_f64(const Tok *t, double *out, int *ok) {
    if (t->type == J_NONE || t->type == J_NULL) { *ok = 0; return 1; }
    *ok = 1;
    return tok_f64(t, out);
}

/* grid/block: absent/null -> not ok; a list of 3 int64 -> values; else 0. */
static int tok_triple(const Tok *t, int64_t out[3], int *ok) {
    if (t->type == J_NONE || t->type == J_NULL) { *ok = 0; return 1; }
    if (t->type != J_ARR) return 0;
    const unsigned char *s = t->p;
    size_t n = t->len, i = sc_ws(s, 1, n);
    int k = 0;
    while (s[i] != ']') {
        Tok e;
        if (k == 3) return 0;
        i = sc_ws(s, read_tok(s, i, n, &e), n);
        if (!tok_i64(&e, &out[k++])) return 0;
        if (s[i] == ',') i = sc_ws(s, i + 1, n);
    }
    if (k != 3) return 0;
    *ok = 1;
    return 1;
}

/* ------------------------------------------------------------------ writing args */

/* Decoded UTF-8 as json_str writes it. */
static int put_escaped(Buf *b, const char *s, size_t len) {
    if (buf_grow(b, len + 2) < 0) return -1;
    b->p[b->len++] = '"';
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        if (buf_put(b, s + start, i - start) < 0) return -1;
        char esc[6];
        size_t k = 2;
        esc[0] = '\\';
        switch (ch) {
            case '"': esc[1] = '"'; break;
            case '\\': esc[1] = '\\'; break;
            case '\n': esc[1] = 'n'; break;
            case '\r': esc[1] = 'r'; break;
            case '\t': esc[1] = 't'; break;
            case '\b': esc[1] = 'b'; break;
            case '\f': esc[1] = 'f'; break;
            default:
                esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
                esc[4] = HEX[ch >> 4]; esc[5] = HEX[ch & 15];
                k = 6;
        }
        if (buf_put(b, esc, k) < 0) return -1;
        start = i + 1;
    }
    if (buf_put(b, s + start, len - start) < 0) return -1;
    return buf_putc(b, '"');
}

/* Whether key (no escapes) repeats one of the keys above it in the key stack. */
static int dup_key(Scan *sc, size_t base, const unsigned char *s, const unsigned char *key,
                   size_t len) {
    size_t *k = (size_t *)(sc->keys.p + base);
    size_t count = (sc->keys.len - base) / (2 * sizeof(size_t));
    for (size_t m = 0; m < count; m++)
        if (k[2 * m + 1] == len && memcmp(s + k[2 * m], key, len) == 0) return 1;
    return 0;
}

static int push_key(Scan *sc, const unsigned char *s, const unsigned char *key, size_t len) {
    size_t pair[2] = {(size_t)(key - s), len};
    return buf_put(&sc->keys, pair, sizeof pair);
}

/* Write the value at s[i] (valid input) as json_value writes what ijson builds of it:
 * 1 written (*j past it), 0 not writable here (the pure path decides), -1 error. */
static int emit_at(Shredder *self, const unsigned char *s, size_t i, size_t n, int depth,
                   size_t *j);

static int emit_tok(Shredder *self, const Tok *t, const unsigned char *s, size_t i, size_t n,
                    int depth) {
    Buf *b = &self->scratch;
    switch (t->type) {
        case J_STR:
            if (!t->esc) {
                if (buf_grow(b, t->len + 2) < 0) return -1;
                b->p[b->len++] = '"';
                memcpy(b->p + b->len, t->p, t->len);
                b->len += t->len;
                b->p[b->len++] = '"';
                return 1;
            }
            if (decode_str(t, &self->scan.tmp) < 0) return -1;
            return put_escaped(b, self->scan.tmp.p ? self->scan.tmp.p : "",
                               self->scan.tmp.len) < 0 ? -1 : 1;
        case J_INT: {
            int64_t x;
            if (!tok_i64(t, &x)) return 0;
            char text[24];
            char *p = text + sizeof text;
            uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
            do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
            if (x < 0) *--p = '-';
            return buf_put(b, p, (size_t)(text + sizeof text - p)) < 0 ? -1 : 1;
        }
        case J_DEC: {
            double d;
            if (!tok_f64(t, &d)) return 0;
            return json_double(b, d);
        }
        case J_TRUE: return buf_put(b, "true", 4) < 0 ? -1 : 1;
        case J_FALSE: return buf_put(b, "false", 5) < 0 ? -1 : 1;
        case J_NULL: return buf_put(b, "null", 4) < 0 ? -1 : 1;
        default: {
            size_t j;
            return emit_at(self, s, i, n, depth, &j);
        }
    }
}

static int emit_at(Shredder *self, const unsigned char *s, size_t i, size_t n, int depth,
                   size_t *j) {
    Scan *sc = &self->scan;
    Buf *b = &self->scratch;
    unsigned char c = s[i];
    if (c != '{' && c != '[') {
        Tok t;
        *j = read_tok(s, i, n, &t);
        return emit_tok(self, &t, s, i, n, depth);
    }
    if (depth >= MAX_DEPTH) return 0;
    if (buf_putc(b, (char)c) < 0) return -1;
    size_t base = sc->keys.len;
    int count = 0, r;
    i = sc_ws(s, i + 1, n);
    while (s[i] != '}' && s[i] != ']') {
        if (count && buf_putc(b, ',') < 0) return -1;
        if (c == '{') {
            Tok k;
            i = read_tok(s, i, n, &k);
            if (k.esc || count >= MAX_KEYS || dup_key(sc, base, s, k.p, k.len)) return 0;
            if (push_key(sc, s, k.p, k.len) < 0) return -1;
            if ((r = emit_tok(self, &k, s, 0, n, depth)) <= 0) return r;
            if (buf_putc(b, ':') < 0) return -1;
            i = sc_ws(s, i, n) + 1;  /* the colon */
            i = sc_ws(s, i, n);
        }
        size_t end;
        if ((r = emit_at(self, s, i, n, depth + 1, &end)) <= 0) return r;
        count++;
        i = sc_ws(s, end, n);
        if (s[i] == ',') i = sc_ws(s, i + 1, n);
    }
    sc->keys.len = base;
    *j = i + 1;
    return buf_putc(b, c == '{' ? '}' : ']') < 0 ? -1 : 1;
}

/* The args keys read into columns (the same keys as shred_one's). */
enum {
    A_CORR, A_EXT, A_EXTL, A_STREAM, A_DEVICE, A_PYID, A_PYPARENT, A_GRID, A_BLOCK, A_REGS,
    A_SHMEM, A_BLOCKS_SM, A_WARPS_SM, A_OCC, A_BYTES, A_BW, A_CONTEXT, A_GRAPH, A_GRAPH_NODE,
    A_MBYTES, A_MTALLOC, A_MTRES, A_MDEVT, A_MDEVID, A_MADDR, A_MNAME, A_MLABELS, A_MSORT, A_N
};
static const char *A_NAMES[A_N] = {
    "correlation", "External id", "external id", "stream", "device", "Python id",
    "Python parent id", "grid", "block", "registers per thread", "shared memory",
    "blocks per SM", "warps per SM", "est. achieved occupancy %", "bytes",
    "memory bandwidth (GB/s)", "context", "graph id", "graph node id", "Bytes",
    "Total Allocated", "Total Reserved", "Device Type", "Device Id", "Addr", "name", "labels",
    "sort_index"};
static size_t A_LENS[A_N];

static int arg_id(const unsigned char *k, size_t len) {
    for (int a = 0; a < A_N; a++)
        if (A_LENS[a] == len && memcmp(A_NAMES[a], k, len) == 0) return a;
    return -1;
}

enum { M_X, M_OTHER };


/* args (a J_OBJ token) -> the compact JSON in scratch of the keys not taken into columns,
 * and the tokens of the keys read into columns (a[]). *left: keys written. With M_X the
 * ids are taken out of the JSON (the Python ids too for python_function), "external id"
 * only when "External id" is absent or null. 1 ok, 0 pure path, -1 error. */
static int scan_args(Shredder *self, const Tok *args, int mode, int is_python, Tok *a,
                     int *left) {
    Scan *sc = &self->scan;
    Buf *b = &self->scratch;
    const unsigned char *s = args->p;
    size_t n = args->len, i = sc_ws(s, 1, n);
    size_t base = sc->keys.len, extl_start = 0, extl_end = 0;
    int extl_first = 0, has_extl = 0, r;
    b->len = 0;
    *left = 0;
    if (buf_putc(b, '{') < 0) return -1;
    while (s[i] != '}') {
        Tok k, v;
        i = read_tok(s, i, n, &k);
        if (k.esc || *left >= MAX_KEYS || dup_key(sc, base, s, k.p, k.len)) return 0;
        if (push_key(sc, s, k.p, k.len) < 0) return -1;
        i = sc_ws(s, sc_ws(s, i, n) + 1, n);
        size_t vpos = i;
        i = sc_ws(s, read_tok(s, i, n, &v), n);
        if (s[i] == ',') i = sc_ws(s, i + 1, n);
        /* a long list or object value: the pure path counts its items and may replace it
         * (rows.cap_long_args: 65,536 items need at least 128 KiB of JSON) */
        if ((v.type == J_ARR || v.type == J_OBJ) && v.len >= ARG_SLOW_BYTES) return 0;
        int id = arg_id(k.p, k.len);
        if (id >= 0) a[id] = v;
        if (mode == M_X && (id == A_CORR || id == A_EXT || id == A_STREAM || id == A_DEVICE ||
                            (is_python && (id == A_PYID || id == A_PYPARENT))))
            continue;
        size_t start = b->len;
        if (*left && buf_putc(b, ',') < 0) return -1;
        if ((r = emit_tok(self, &k, s, 0, n, 2)) <= 0) return r;
        if (buf_putc(b, ':') < 0) return -1;
        if ((r = emit_tok(self, &v, s, vpos, n, 2)) <= 0) return r;
        if (mode == M_X && id == A_EXTL) {
            has_extl = 1;
            extl_first = *left == 0;
            extl_start = start;
            extl_end = b->len;
        }
        (*left)++;
    }
    sc->keys.len = base;
    if (mode == M_X && has_extl && (a[A_EXT].type == J_NONE || a[A_EXT].type == J_NULL)) {
        /* "external id" stands in for "External id": out of the JSON */
        size_t from = extl_start, to = extl_end;
        if (extl_first && *left > 1) to++;  /* the comma before the next key */
        memmove(b->p + from, b->p + to, b->len - to);
        b->len -= to - from;
        (*left)--;
    }
    return buf_putc(b, '}') < 0 ? -1 : 1;
}

/* ------------------------------------------------------------------ events */

enum { F_PH_, F_CAT_, F_NAME_, F_PID_, F_TID_, F_TS_, F_DUR_, F_ARGS_, F_ID_, F_BP_, F_S_, F_N_ };

static int field_id(const unsigned char *k, size_t len) {
    switch (len) {
        case 1: return k[0] == 's' ? F_S_ : -1;
        case 2:
            if (k[0] == 'p' && k[1] == 'h') return F_PH_;
            if (k[0] == 't' && k[1] == 's') return F_TS_;
            if (k[0] == 'i' && k[1] == 'd') return F_ID_;
            if (k[0] == 'b' && k[1] == 'p') return F_BP_;
            return -1;
        case 3:
            if (memcmp(k, "cat", 3) == 0) return F_CAT_;
            if (memcmp(k, "pid", 3) == 0) return F_PID_;
            if (memcmp(k, "tid", 3) == 0) return F_TID_;
            if (memcmp(k, "dur", 3) == 0) return F_DUR_;
            return -1;
        case 4:
            if (memcmp(k, "name", 4) == 0) return F_NAME_;
            if (memcmp(k, "args", 4) == 0) return F_ARGS_;
            return -1;
        default: return -1;
    }
}

/* A metadata event (ph M) as sql/ingest/02_shred.sql's `thr` statement stages it: kind
 * its name; value its args' "name" if that key is there, else their "labels" (a string
 * as it is, an int as its digits, null or absent NULL; any other type: the pure path);
 * sort_index an int "sort_index" (absent or null: NULL; another type: the pure path).
 * Its ts needs no value (the pure path counts no missing_ts for ph M) but one that is
 * there must convert. 1 staged, 0 for the pure path, -1 error. */
static int scan_meta(Shredder *self, const Tok *f, const Head *h) {
    Scan *sc = &self->scan;
    int64_t ts;
    if (f[F_TS_].type != J_NONE && f[F_TS_].type != J_NULL && !tok_ns(&f[F_TS_], &ts)) return 0;
    const Tok *args = &f[F_ARGS_];
    Tok a[A_N];
    memset(a, 0, sizeof a);
    int left = 0, r;
    if (args->type == J_OBJ) {
        if ((r = scan_args(self, args, M_OTHER, 0, a, &left)) <= 0) return r;
    } else if (args->type != J_NONE && args->type != J_NULL) {
        return 0;  /* mistyped_args */
    }
    const Tok *v = a[A_MNAME].type != J_NONE ? &a[A_MNAME] : &a[A_MLABELS];
    const char *value = NULL;
    Py_ssize_t value_len = 0;
    int value_ok = 0;
    char text[24];
    if (v->type == J_STR) {
        if ((r = tok_str(v, &sc->dec_other, &value, &value_len)) <= 0) return r;
        value_ok = 1;
    } else if (v->type == J_INT) {
        int64_t x;
        if (!tok_i64(v, &x)) return 0;
        char *p = text + sizeof text;
        uint64_t u = x < 0 ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;
        do { *--p = (char)('0' + u % 10); u /= 10; } while (u);
        if (x < 0) *--p = '-';
        value = p;
        value_len = (Py_ssize_t)(text + sizeof text - p);
        value_ok = 1;
    } else if (v->type != J_NONE && v->type != J_NULL) {
        return 0;
    }
    int64_t sort = 0;
    int sort_ok = 0;
    if (!tok_opt_i64(&a[A_MSORT], &sort, &sort_ok)) return 0;
    return append_meta(self, h, value, value_len, value_ok, sort, sort_ok);
}

/* Stage the element s[0, n) (valid, complete) if it is an ordinary event: 1 staged,
 * 2 skipped python, 0 for the pure path, -1 error. */
static int scan_event(Shredder *self, const unsigned char *s, size_t n, int64_t index) {
    Scan *sc = &self->scan;
    if (s[0] != '{') return 0;
    sc->keys.len = 0;
    Tok f[F_N_];
    memset(f, 0, sizeof f);
    size_t i = sc_ws(s, 1, n);
    while (s[i] != '}') {
        Tok k;
        i = read_tok(s, i, n, &k);
        if (k.esc) return 0;
        int id = field_id(k.p, k.len);
        i = sc_ws(s, sc_ws(s, i, n) + 1, n);
        Tok v;
        i = sc_ws(s, read_tok(s, i, n, &v), n);
        if (s[i] == ',') i = sc_ws(s, i + 1, n);
        if (id < 0) continue;
        if (f[id].type != J_NONE) return 0;  /* a repeated key: the dict keeps the last */
        f[id] = v;
    }
    const char *ph;
    Py_ssize_t ph_len;
    if (f[F_PH_].type != J_STR) return 0;
    if (tok_str(&f[F_PH_], &sc->dec_ph, &ph, &ph_len) < 0) return -1;
    if (ph_len != 1) return 0;
    char phc = ph[0];
    if (phc != 'X' && phc != 's' && phc != 't' && phc != 'f' && phc != 'i' && phc != 'I' &&
        phc != 'M')
        return 0;
    const char *cat, *name;
    Py_ssize_t cat_len, name_len;
    int r;
    if ((r = tok_str(&f[F_CAT_], &sc->dec_cat, &cat, &cat_len)) <= 0) return r;
    if ((r = tok_str(&f[F_NAME_], &sc->dec_name, &name, &name_len)) <= 0) return r;
    int64_t pid = 0, tid = 0, ts = 0;
    int pid_ok, tid_ok;
    const char *pid_label, *tid_label;
    Py_ssize_t pid_label_len, tid_label_len;
    if ((r = tok_id(&f[F_PID_], &sc->dec_pid, &pid, &pid_ok, &pid_label, &pid_label_len)) <= 0)
        return r;
    if ((r = tok_id(&f[F_TID_], &sc->dec_tid, &tid, &tid_ok, &tid_label, &tid_label_len)) <= 0)
        return r;
    Head h = {index, phc, cat, name, cat_len, name_len, pid, tid, 0, pid_ok, tid_ok,
              pid_label, tid_label, pid_label_len, tid_label_len};
    if (phc == 'M') return scan_meta(self, f, &h);
    if (!tok_ns(&f[F_TS_], &ts)) return 0;  /* missing, null or not exact: missing_ts etc. */
    h.ts = ts;
    const Tok *args = &f[F_ARGS_];
    if (args->type == J_NULL) args = NULL;
    else if (args->type == J_NONE) args = NULL;
    else if (args->type != J_OBJ) return 0;  /* mistyped_args */
    Tok a[A_N];
    memset(a, 0, sizeof a);
    int left = 0;

    if (phc == 'i' || phc == 'I') {
        const char *scope;
        Py_ssize_t scope_len;
        if ((r = tok_str(&f[F_S_], &sc->dec_other, &scope, &scope_len)) <= 0) return r;
        int64_t v[6] = {0};
        int ok[6] = {0};
        if (args) {
            if ((r = scan_args(self, args, M_OTHER, 0, a, &left)) <= 0) return r;
            for (int k = 0; k < 6; k++)
                if (!tok_opt_i64(&a[A_MBYTES + k], &v[k], &ok[k])) return 0;
        }
        return append_instant(self, &h, scope, scope_len, v, ok, left > 0);
    }
    if (phc != 'X') {  /* a flow event */
        int64_t fid;
        int fid_ok;
        if (!tok_opt_i64(&f[F_ID_], &fid, &fid_ok) || !fid_ok) return 0;
        const char *bp;
        Py_ssize_t bp_len;
        if ((r = tok_str(&f[F_BP_], &sc->dec_other, &bp, &bp_len)) <= 0) return r;
        if (args && (r = scan_args(self, args, M_OTHER, 0, a, &left)) <= 0) return r;
        return append_flow(self, &h, fid, bp, bp_len, left > 0);
    }

    if (name == NULL) return 0;  /* missing_name */
    int has_cat = cat != NULL;
    int is_python = has_cat && cat_len == sc->pycat_len &&
                    memcmp(cat, sc->pycat, (size_t)cat_len) == 0;
    if (is_python && self->skip_python &&
        !(name_len >= MODULE_PREFIX_LEN && memcmp(name, MODULE_PREFIX, MODULE_PREFIX_LEN) == 0))
        return 2;
    int is_gpu = 0;
    if (has_cat && !is_python)
        for (Py_ssize_t g = 0; g < sc->ngpu; g++)
            if (sc->gpu_len[g] == cat_len && memcmp(sc->gpu[g], cat, (size_t)cat_len) == 0) {
                is_gpu = 1;
                break;
            }
    int64_t dur = 0;
    int dur_ok = 0;
    if (f[F_DUR_].type != J_NONE && f[F_DUR_].type != J_NULL) {
        if (!tok_ns(&f[F_DUR_], &dur)) return 0;
        if (dur < 0) return 0;  /* negative_dur */
        dur_ok = 1;
    }
    int64_t ids[6] = {0};
    int ids_ok[6] = {0};
    int args_ok = 0, gpu_row = 0;
    int empty = args && args->p[sc_ws(args->p, 1, args->len)] == '}';
    if (args && !empty) {
        if ((r = scan_args(self, args, M_X, is_python, a, &left)) <= 0) return r;
        if (!tok_opt_i64(&a[A_CORR], &ids[0], &ids_ok[0])) return 0;
        if (!tok_opt_i64(&a[A_EXT], &ids[1], &ids_ok[1])) return 0;
        if (!ids_ok[1] && !tok_opt_i64(&a[A_EXTL], &ids[1], &ids_ok[1])) return 0;
        if (!tok_opt_i64(&a[A_STREAM], &ids[2], &ids_ok[2])) return 0;
        if (!tok_opt_i64(&a[A_DEVICE], &ids[3], &ids_ok[3])) return 0;
        if (is_python) {
            if (!tok_opt_i64(&a[A_PYID], &ids[4], &ids_ok[4])) return 0;
            if (!tok_opt_i64(&a[A_PYPARENT], &ids[5], &ids_ok[5])) return 0;
        }
        args_ok = left > 0;
        gpu_row = is_gpu && left > 0;
    } else if (args) {
        gpu_row = is_gpu;  /* an empty args object: a row of NULLs */
        self->scratch.len = 0;
    }
    GpuArgs g;
    if (gpu_row) {
        int64_t t[3];
        int ok;
        if (!tok_triple(&a[A_GRID], t, &ok)) return 0;
        for (int k = 0; k < 3; k++) { g.v[G_GRID_X + k] = t[k]; g.ok[G_GRID_X + k] = ok; }
        if (!tok_triple(&a[A_BLOCK], t, &ok)) return 0;
        for (int k = 0; k < 3; k++) { g.v[G_BLOCK_X + k] = t[k]; g.ok[G_BLOCK_X + k] = ok; }
        static const int icol[6] = {G_REGS, G_SHMEM, G_BYTES, G_CONTEXT, G_GRAPH, G_GRAPH_NODE};
        static const int iarg[6] = {A_REGS, A_SHMEM, A_BYTES, A_CONTEXT, A_GRAPH, A_GRAPH_NODE};
        for (int k = 0; k < 6; k++)
            if (!tok_opt_i64(&a[iarg[k]], &g.v[icol[k]], &g.ok[icol[k]])) return 0;
        static const int fcol[4] = {G_BLOCKS_SM, G_WARPS_SM, G_OCC, G_BW};
        static const int farg[4] = {A_BLOCKS_SM, A_WARPS_SM, A_OCC, A_BW};
        for (int k = 0; k < 4; k++)
            if (!tok_opt_f64(&a[farg[k]], &g.f[fcol[k]], &g.ok[fcol[k]])) return 0;
    }

    EventRow row = {index, pid, tid, ts, dur, pid_ok, tid_ok, dur_ok, args_ok, gpu_row, is_gpu,
                    is_python, cat, name, cat_len, name_len, ids, ids_ok, &g,
                    pid_label, tid_label, pid_label_len, tid_label_len};
    return append_event(self, &row);
}

/* ------------------------------------------------------------------ the document */

/* One element of traceEvents at s[i]: 3 taken, 0 incomplete, -1 bail, -2 error. */
static int scan_element(Shredder *self, const unsigned char *s, size_t i, size_t n,
                        PyObject *slow) {
    Scan *sc = &self->scan;
    size_t end;
    int r = skip_value(sc, s, i, n, &end);
    if (r == -2) return -2;
    if (r < 0) return -1;
    if (r == 0) return sc->eof ? -1 : 0;
    int64_t index = self->index++;
    r = scan_event(self, s + i, end - i, index);
    if (r < 0) return -2;
    if (r == 0) {
        PyObject *pair = Py_BuildValue("(Ly#)", (long long)index, (const char *)(s + i),
                                       (Py_ssize_t)(end - i));
        if (!pair) return -2;
        int bad = PyList_Append(slow, pair);
        Py_DECREF(pair);
        if (bad) return -2;
    } else if (r == 2) self->skipped_python++;
    else self->fast++;
    sc->pos = end;
    sc->state = D_EV_NEXT;
    return 3;
}

/* One step: 1 progress, 3 an element taken, 0 more input needed, 2 done, -1 bail, -2. */
static int doc_step(Shredder *self, PyObject *slow) {
    Scan *sc = &self->scan;
    const unsigned char *s = (const unsigned char *)sc->in.p;
    size_t n = sc->in.len, i = sc_ws(s, sc->pos, n), j, v;
    int r, esc;
    sc->pos = i;
    if (i >= n) return !sc->eof ? 0 : sc->state == D_END ? 2 : -1;
    unsigned char c = s[i];
    switch (sc->state) {
        case D_START:
            if (c == '{') { sc->state = D_KEY_FIRST; sc->pos = i + 1; return 1; }
            if (c == '[') { sc->is_array = 1; sc->state = D_EV_FIRST; sc->pos = i + 1; return 1; }
            return -1;
        case D_KEY_FIRST:
        case D_KEY:
            if (c != '"') return -1;
            r = skip_string(s, i, n, &j, &esc);
            if (r <= 0) return r == 0 && !sc->eof ? 0 : -1;
            if (esc) return -1;
            v = sc_ws(s, j, n);
            if (v >= n) return sc->eof ? -1 : 0;
            if (s[v] != ':') return -1;
            v = sc_ws(s, v + 1, n);
            if (v >= n) return sc->eof ? -1 : 0;
            if (j - i - 2 == 11 && memcmp(s + i + 1, "traceEvents", 11) == 0) {
                if (sc->events_seen || s[v] != '[') return -1;
                sc->events_seen = 1;
                sc->state = D_EV_FIRST;
                sc->pos = v + 1;
                return 1;
            }
            r = skip_value(sc, s, v, n, &j);
            if (r == -2) return -2;
            if (r <= 0) return r == 0 && !sc->eof ? 0 : -1;
            sc->state = D_MEMBER_END;
            sc->pos = j;
            return 1;
        case D_MEMBER_END:
            if (c == ',') { sc->state = D_KEY; sc->pos = i + 1; return 1; }
            if (c == '}' && sc->events_seen) { sc->state = D_END; sc->pos = i + 1; return 1; }
            return -1;
        case D_EV_FIRST:
        case D_EV_NEXT:
            if (c == ']') {
                if (!sc->is_array) {
                    sc->events_closed = 1;
                    sc->events_end = sc->base + (long long)i;
                }
                sc->state = sc->is_array ? D_END : D_MEMBER_END;
                sc->pos = i + 1;
                return 1;
            }
            if (sc->state == D_EV_NEXT) {
                if (c != ',') return -1;
                sc->state = D_EV_ITEM;
                sc->pos = i + 1;
                return 1;
            }
            return scan_element(self, s, i, n, slow);
        case D_EV_ITEM:
            return scan_element(self, s, i, n, slow);
        default:
            return -1;  /* bytes after the document */
    }
}

/* More input: keep the unconsumed bytes, read until the buffer holds twice as many
 * (an element that does not fit is scanned again only after doubling). 0 ok, -1. */
static int scan_feed(Shredder *self, PyObject *read) {
    Scan *sc = &self->scan;
    if (sc->pos) {
        memmove(sc->in.p, sc->in.p + sc->pos, sc->in.len - sc->pos);
        sc->in.len -= sc->pos;
        sc->base += (long long)sc->pos;
        sc->pos = 0;
    }
    size_t want = sc->in.len * 2;
    do {
        PyObject *chunk = PyObject_CallNoArgs(read);
        if (!chunk) return -1;
        if (!PyBytes_Check(chunk)) {
            Py_DECREF(chunk);
            PyErr_SetString(PyExc_TypeError, "read() must return bytes");
            return -1;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(chunk);
        int bad = len ? buf_put(&sc->in, PyBytes_AS_STRING(chunk), (size_t)len) : 0;
        Py_DECREF(chunk);
        if (bad < 0) return -1;
        if (!len) {
            sc->eof = 1;
            break;
        }
    } while (sc->in.len < want);
    return 0;
}

PyDoc_STRVAR(scan_doc,
"scan(read, limit, slow) -> int\n\n"
"Read the document from ``read()`` (bytes; b'' at the end) and stage its ordinary\n"
"events, at most ``limit`` elements of traceEvents per call; the others are appended to\n"
"``slow`` as ``(index, bytes of the element)``. Returns 0 (call again), 1 (the document\n"
"is complete and valid) or 2 (give up: stage this document through ijson instead).");

static PyObject *Shredder_scan(Shredder *self, PyObject *args) {
    PyObject *read, *slow;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "OnO!", &read, &limit, &PyList_Type, &slow)) return NULL;
    Py_ssize_t taken = 0;
    for (;;) {
        int r = doc_step(self, slow);
        if (r == 3) {
            if (++taken >= limit) return PyLong_FromLong(0);
        } else if (r == 2) {
            return PyLong_FromLong(1);
        } else if (r == -1) {
            return PyLong_FromLong(2);
        } else if (r == -2) {
            if (!PyErr_Occurred()) PyErr_NoMemory();
            return NULL;
        } else if (r == 0) {
            if (scan_feed(self, read) < 0) return NULL;
        }
    }
}

static PyObject *Shredder_get_is_array(Shredder *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->scan.is_array);
}

static PyObject *Shredder_get_events_end(Shredder *self, void *Py_UNUSED(closure)) {
    if (!self->scan.events_closed) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->scan.events_end);
}

static int scan_init(Shredder *self) {
    Scan *sc = &self->scan;
    for (int a = 0; a < A_N; a++) A_LENS[a] = strlen(A_NAMES[a]);
    str_stop_init();
    crc_init();
    Py_ssize_t len;
    const char *py = PyUnicode_AsUTF8AndSize(self->python_cat, &len);
    if (!py) return -1;
    sc->pycat = PyMem_RawMalloc((size_t)len + 1);
    if (!sc->pycat) { PyErr_NoMemory(); return -1; }
    memcpy(sc->pycat, py, (size_t)len + 1);
    sc->pycat_len = len;
    Py_ssize_t count = PySet_GET_SIZE(self->gpu_cats);
    sc->gpu = PyMem_RawCalloc((size_t)count + 1, sizeof(char *));
    sc->gpu_len = PyMem_RawCalloc((size_t)count + 1, sizeof(Py_ssize_t));
    if (!sc->gpu || !sc->gpu_len) { PyErr_NoMemory(); return -1; }
    PyObject *it = PyObject_GetIter(self->gpu_cats), *item;
    if (!it) return -1;
    while ((item = PyIter_Next(it))) {
        const char *g = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len) : NULL;
        if (!g) { PyErr_Clear(); Py_DECREF(item); continue; }  /* not a str: never a cat */
        char *copy = PyMem_RawMalloc((size_t)len + 1);
        if (!copy) { Py_DECREF(item); Py_DECREF(it); PyErr_NoMemory(); return -1; }
        memcpy(copy, g, (size_t)len + 1);
        sc->gpu[sc->ngpu] = copy;
        sc->gpu_len[sc->ngpu++] = len;
        Py_DECREF(item);
    }
    Py_DECREF(it);
    return PyErr_Occurred() ? -1 : 0;
}

static void scan_free(Shredder *self) {
    Scan *sc = &self->scan;
    buf_free(&sc->in); buf_free(&sc->stack); buf_free(&sc->keys);
    buf_free(&sc->dec_cat); buf_free(&sc->dec_name); buf_free(&sc->dec_other);
    buf_free(&sc->dec_ph); buf_free(&sc->dec_pid); buf_free(&sc->dec_tid); buf_free(&sc->tmp);
    if (sc->gpu)
        for (Py_ssize_t g = 0; g < sc->ngpu; g++) PyMem_RawFree(sc->gpu[g]);
    PyMem_RawFree(sc->gpu);
    PyMem_RawFree(sc->gpu_len);
    PyMem_RawFree(sc->pycat);
    memset(sc, 0, sizeof *sc);
}
