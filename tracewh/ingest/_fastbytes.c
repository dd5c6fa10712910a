/* Counting bytes and short byte strings in a buffer, sixteen bytes at a time (SSE2).
 *
 * Included by _fastshred.c. ``count(buffer, needle, start=0)`` is ``bytes.count`` for a
 * contiguous bytes-like buffer, a bytes-like needle and an int start: the non-overlapping
 * occurrences of ``needle`` in ``buffer[start:]``. Every decompressed byte
 * of a trace passes two of them before the scanner sees it (tracewh.ingest.strings counts
 * the unescaped quotes of each chunk, tracewh.ingest.decompress the ``"traceEvents"`` keys):
 * CPython's count reads a byte at a time for one byte (~3 GB/s here), and ~3.7 GB/s for the
 * key. Here: one byte by compare-and-subtract into byte counters summed with ``psadbw``; a
 * longer needle by the "generic SIMD" substring search (W. Mula): sixteen positions at a
 * time whose two chosen needle bytes both match, each candidate then compared whole.
 * Without SSE2 (not x86-64) the same counts byte by byte.
 */

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static Py_ssize_t count_byte(const unsigned char *s, Py_ssize_t n, unsigned char c) {
    Py_ssize_t total = 0, i = 0;
#if defined(__SSE2__)
    const __m128i needle = _mm_set1_epi8((char)c);
    const __m128i zero = _mm_setzero_si128();
    while (n - i >= 16) {
        /* up to 255 blocks into byte counters (each compare adds 0 or -1 = one more) */
        Py_ssize_t blocks = (n - i) / 16;
        if (blocks > 255) blocks = 255;
        __m128i acc = zero;
        for (Py_ssize_t b = 0; b < blocks; b++, i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
            acc = _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, needle));
        }
        __m128i sums = _mm_sad_epu8(acc, zero);
        total += _mm_cvtsi128_si32(sums) + _mm_cvtsi128_si32(_mm_unpackhi_epi64(sums, sums));
    }
#endif
    for (; i < n; i++) total += s[i] == c;
    return total;
}

/* The two needle bytes a block is filtered on: the first and last that are not JSON
 * punctuation or whitespace (those are everywhere in a trace), else the ends. */
static int filter_byte(unsigned char c) {
    return !(c == '"' || c == ',' || c == ':' || c == '{' || c == '}' || c == '[' || c == ']'
             || c == ' ' || c == '\n' || c == '\r' || c == '\t');
}

static Py_ssize_t count_bytes(const unsigned char *s, Py_ssize_t n, const unsigned char *w,
                              Py_ssize_t k) {
    if (k == 1) return count_byte(s, n, w[0]);
    Py_ssize_t total = 0, i = 0;
    if (k > n) return 0;
#if defined(__SSE2__)
    Py_ssize_t p = 0, q = k - 1;
    while (p < k && !filter_byte(w[p])) p++;
    while (q > p && !filter_byte(w[q])) q--;
    if (p >= q) { p = 0; q = k - 1; }
    const __m128i first = _mm_set1_epi8((char)w[p]);
    const __m128i last = _mm_set1_epi8((char)w[q]);
    /* i: the candidate start; blocks cover starts i..i+15 whose last needle byte is in s */
    while (i + 15 + k <= n) {
        __m128i a = _mm_loadu_si128((const __m128i *)(s + i + p));
        __m128i b = _mm_loadu_si128((const __m128i *)(s + i + q));
        unsigned mask = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(a, first), _mm_cmpeq_epi8(b, last)));
        Py_ssize_t next = i + 16;
        while (mask) {
            int bit = __builtin_ctz(mask);
            Py_ssize_t at = i + bit;
            mask &= mask - 1;
            if (memcmp(s + at, w, (size_t)k) == 0) {
                total++;
                /* non-overlapping: the next match starts after this one */
                Py_ssize_t skip = at + k;
                if (skip >= next) { next = skip; mask = 0; }
                else mask &= ~0u << (skip - i);
            }
        }
        i = next;
    }
#endif
    while (i + k <= n) {
        if (s[i] == w[0] && memcmp(s + i, w, (size_t)k) == 0) { total++; i += k; }
        else i++;
    }
    return total;
}

static PyObject *count(PyObject *Py_UNUSED(m), PyObject *args) {
    Py_buffer buf, needle;
    Py_ssize_t start = 0;
    if (!PyArg_ParseTuple(args, "y*y*|n", &buf, &needle, &start)) return NULL;
    Py_ssize_t n = buf.len, k = needle.len, out;
    if (start < 0) { start += n; if (start < 0) start = 0; }
    if (start > n) out = 0;
    else if (k == 0) out = n - start + 1;
    else {
        Py_BEGIN_ALLOW_THREADS
        out = count_bytes((const unsigned char *)buf.buf + start, n - start,
                          (const unsigned char *)needle.buf, k);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&buf);
    PyBuffer_Release(&needle);
    return PyLong_FromSsize_t(out);
}
