/* State of the direct scanner of tracewh.ingest._fastshred (see _fastscan.c). */
#ifndef TRACEWH_FASTSCAN_H
#define TRACEWH_FASTSCAN_H

/* An args list or object value at least this long (JSON bytes) sends its event to the pure
 * path, which counts the value's items and replaces it by a marker beyond 65,536 of them
 * (tracewh.ingest.rows.cap_long_args; 65,536 items need at least 128 KiB of JSON): both the
 * scanner (scan_args) and the shredder of parsed events (args_json) do this. */
#define ARG_SLOW_BYTES ((size_t)128 << 10)

typedef struct {
    Buf in;          /* input bytes; [pos, in.len) not consumed yet */
    size_t pos;
    int eof;         /* read() returned b"" */
    int state;       /* where in the document we are (D_* in _fastscan.c) */
    int is_array;    /* the document is a bare array of events */
    int events_seen; /* the traceEvents member was found */
    int events_closed;   /* the ``]`` closing traceEvents was found, at ``events_end`` */
    long long base;      /* bytes read() returned before in.p[0] */
    long long events_end;
    Buf stack;       /* containers open in skip_value */
    Buf keys;        /* (offset, length) of the keys of the objects being written */
    Buf dec_cat, dec_name, dec_other, dec_ph, dec_pid, dec_tid, tmp;  /* decoded strings */
    char **gpu;      /* the GPU op categories, UTF-8 */
    Py_ssize_t *gpu_len;
    Py_ssize_t ngpu;
    char *pycat;
    Py_ssize_t pycat_len;
} Scan;

#endif
