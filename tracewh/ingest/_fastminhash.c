/* The MinHash signature of a run's workload tokens (the ``fingerprints`` table), in C.
 *
 * Included by _fastshred.c. ``minhash(tokens, slots)``: for each slot i, the least
 * md5_lower("<i>:<token>") over the tokens, shifted right by one bit, where md5_lower is
 * DuckDB's ``md5_number_lower``: bytes 8..15 of the MD5 digest read as a little-endian
 * uint64. The values are those of sql/ingest/29_out_fingerprints.sql's definition
 * (tests/ingest/test_fingerprints.py compares them with DuckDB's and hashlib's md5); MD5 as
 * RFC 1321 defines it. A token is hashed 128 times: DuckDB's md5 took ~0.67 us a call,
 * a scalar C one ~0.2 us; eight at once (one lane per slot, md5_block_v) less again.
 */

static const uint32_t MD5_K[64] = {
    0xd76aa478u, 0xe8c7b756u, 0x242070dbu, 0xc1bdceeeu,
    0xf57c0fafu, 0x4787c62au, 0xa8304613u, 0xfd469501u,
    0x698098d8u, 0x8b44f7afu, 0xffff5bb1u, 0x895cd7beu,
    0x6b901122u, 0xfd987193u, 0xa679438eu, 0x49b40821u,
    0xf61e2562u, 0xc040b340u, 0x265e5a51u, 0xe9b6c7aau,
    0xd62f105du, 0x02441453u, 0xd8a1e681u, 0xe7d3fbc8u,
    0x21e1cde6u, 0xc33707d6u, 0xf4d50d87u, 0x455a14edu,
    0xa9e3e905u, 0xfcefa3f8u, 0x676f02d9u, 0x8d2a4c8au,
    0xfffa3942u, 0x8771f681u, 0x6d9d6122u, 0xfde5380cu,
    0xa4beea44u, 0x4bdecfa9u, 0xf6bb4b60u, 0xbebfbc70u,
    0x289b7ec6u, 0xeaa127fau, 0xd4ef3085u, 0x04881d05u,
    0xd9d4d039u, 0xe6db99e5u, 0x1fa27cf8u, 0xc4ac5665u,
    0xf4292244u, 0x432aff97u, 0xab9423a7u, 0xfc93a039u,
    0x655b59c3u, 0x8f0ccc92u, 0xffeff47du, 0x85845dd1u,
    0x6fa87e4fu, 0xfe2ce6e0u, 0xa3014314u, 0x4e0811a1u,
    0xf7537e82u, 0xbd3af235u, 0x2ad7d2bbu, 0xeb86d391u,
};

static const unsigned char MD5_S[64] = {
    7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
    5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
    4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
    6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
};

/* Eight MD5s side by side (GCC/Clang vector extensions: SSE2 pairs or AVX2, whatever the
 * target has): the lanes of one call are messages of the same length, so they run the same
 * blocks in lockstep. */
#define MD5_LANES 8
typedef uint32_t md5_v __attribute__((vector_size(4 * MD5_LANES)));

static void md5_block_v(md5_v h[4], const md5_v m[16]) {
    md5_v a = h[0], b = h[1], c = h[2], d = h[3];
#pragma GCC unroll 64
    for (int i = 0; i < 64; i++) {
        md5_v f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        f = f + a + MD5_K[i] + m[g];
        a = d;
        d = c;
        c = b;
        b = b + ((f << MD5_S[i]) | (f >> (32 - MD5_S[i])));
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

/* Bytes 8..15 of md5(prefix[j] + token) as a little-endian uint64 (DuckDB's
 * md5_number_lower: h[2] | h[3] << 32) into out[j], for MD5_LANES prefixes of one length
 * np (at most 7 bytes). The lanes differ only in their first 8 bytes (the first two message
 * words); every other word is the same in each lane and loaded once. ``msg`` holds
 * prefix[0] + token and has room for 72 bytes more (the padding is written there). */
static void md5_lower_v(const char prefix[MD5_LANES][24], size_t np, unsigned char *msg,
                        size_t n, uint64_t out[MD5_LANES]) {
    md5_v h[4] = {{0}, {0}, {0}, {0}};
    h[0] += 0x67452301u; h[1] += 0xefcdab89u; h[2] += 0x98badcfeu; h[3] += 0x10325476u;
    size_t padded = (n + 8) / 64 * 64 + 64;
    uint64_t bits = (uint64_t)n * 8u;
    msg[n] = 0x80;
    memset(msg + n + 1, 0, padded - n - 1 - 8);
    for (int k = 0; k < 8; k++) msg[padded - 8 + k] = (unsigned char)(bits >> (8 * k));
    /* each lane's first 8 bytes: its prefix, then the message's bytes after the prefix */
    uint32_t head[MD5_LANES][2];
    for (int j = 0; j < MD5_LANES; j++) {
        unsigned char b[8];
        memcpy(b, prefix[j], np);
        memcpy(b + np, msg + np, 8 - np);
        head[j][0] = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
        head[j][1] = (uint32_t)b[4] | ((uint32_t)b[5] << 8) | ((uint32_t)b[6] << 16) | ((uint32_t)b[7] << 24);
    }
    for (size_t at = 0; at < padded; at += 64) {
        md5_v m[16];
        for (int k = 0; k < 16; k++) {
            const unsigned char *p = msg + at + 4 * k;
            uint32_t w = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                         ((uint32_t)p[3] << 24);
            m[k] = (md5_v){0} + w;
        }
        if (at == 0)
            for (int j = 0; j < MD5_LANES; j++) {
                m[0][j] = head[j][0];
                m[1][j] = head[j][1];
            }
        md5_block_v(h, m);
    }
    for (int j = 0; j < MD5_LANES; j++) out[j] = (uint64_t)h[2][j] | ((uint64_t)h[3][j] << 32);
}

static PyObject *minhash(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *tokens;
    Py_ssize_t slots;
    if (!PyArg_ParseTuple(args, "O!n", &PyList_Type, &tokens, &slots)) return NULL;
    if (slots < 0 || slots > 100000) {
        PyErr_SetString(PyExc_ValueError, "slots out of range");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(tokens);
    if (n == 0) return PyList_New(0);
    const char **ptr = PyMem_RawMalloc((size_t)n * sizeof(char *));
    Py_ssize_t *len = PyMem_RawMalloc((size_t)n * sizeof(Py_ssize_t));
    uint64_t *best = PyMem_RawMalloc((size_t)slots * sizeof(uint64_t));
    unsigned char *msg = NULL;
    PyObject *out = NULL;
    if (!ptr || !len || !best) { PyErr_NoMemory(); goto done; }
    Py_ssize_t longest = 0;
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *item = PyList_GET_ITEM(tokens, t);
        ptr[t] = PyUnicode_Check(item) ? PyUnicode_AsUTF8AndSize(item, &len[t]) : NULL;
        if (!ptr[t]) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "tokens must be str");
            goto done;
        }
        if (len[t] > longest) longest = len[t];
    }
    msg = PyMem_RawMalloc((size_t)longest + 24 + 72);
    if (!msg) { PyErr_NoMemory(); goto done; }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < slots; i++) best[i] = UINT64_MAX;
    /* slots in batches of MD5_LANES whose prefixes "<i>:" have one length (so their messages
     * do), each token hashed for a whole batch at once; a short batch repeats its last slot */
    for (Py_ssize_t i = 0; i < slots;) {
        char prefix[MD5_LANES][24];
        int np = snprintf(prefix[0], 24, "%zd:", i);
        Py_ssize_t slot[MD5_LANES];
        int used = 0;
        while (used < MD5_LANES && i + used < slots) {
            int k = snprintf(prefix[used], 24, "%zd:", i + used);
            if (k != np) break;
            slot[used] = i + used;
            used++;
        }
        for (int j = used; j < MD5_LANES; j++) {
            memcpy(prefix[j], prefix[used - 1], 24);
            slot[j] = slot[used - 1];
        }
        memcpy(msg, prefix[0], (size_t)np);
        for (Py_ssize_t t = 0; t < n; t++) {
            uint64_t v[MD5_LANES];
            memcpy(msg + np, ptr[t], (size_t)len[t]);
            md5_lower_v((const char (*)[24])prefix, (size_t)np, msg, (size_t)np + (size_t)len[t], v);
            for (int j = 0; j < used; j++)
                if (v[j] < best[slot[j]]) best[slot[j]] = v[j];
        }
        i += used;
    }
    Py_END_ALLOW_THREADS
    out = PyList_New(slots);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < slots; i++) {
        PyObject *v = PyLong_FromLongLong((long long)(best[i] >> 1));
        if (!v) { Py_CLEAR(out); goto done; }
        PyList_SET_ITEM(out, i, v);
    }
done:
    PyMem_RawFree(msg);
    PyMem_RawFree(ptr);
    PyMem_RawFree(len);
    PyMem_RawFree(best);
    return out;
}
