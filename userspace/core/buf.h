/* SPDX-License-Identifier: Apache-2.0 */
/* buf: a growable byte buffer with a read offset, used for socket I/O and for building text.
 * Contract: data[off..len) is unread content; data is always NUL-terminated at len (so text
 * built with buf_printf can be used as a C string); functions that grow return 0 or -ENOMEM. */
#ifndef KVS_BUF_H
#define KVS_BUF_H

#include <stddef.h>
#include <stdint.h>

struct buf {
	char *data;
	size_t len; /* bytes written */
	size_t off; /* bytes consumed from the front */
	size_t cap;
};

/* Makes sure at least n more bytes fit after len. Returns 0 or -ENOMEM. */
int buf_reserve(struct buf *b, size_t n);
/* Appends n bytes. Returns 0 or -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
/* Appends a C string. */
int buf_puts(struct buf *b, const char *s);
/* Appends printf-formatted text. Returns 0 or -ENOMEM. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes), escaping as RFC 8259 requires and exactly as
 * Python's json.dumps(s, ensure_ascii=False) does: the short escapes \" \\ \n \r \t \b \f, other
 * control bytes as \u00XX, everything else (UTF-8 included) as is. Returns 0 or -ENOMEM. */
int buf_json_str(struct buf *b, const char *s, size_t n);
/* Marks n unread bytes consumed; compacts when everything has been read. */
void buf_consume(struct buf *b, size_t n);
/* Unread bytes and their count. A buffer never written (or freed) has data NULL: then NULL, not
 * NULL + 0 (undefined behaviour, reported by UBSan). */
static inline const char *buf_rptr(const struct buf *b)
{
	return b->off ? b->data + b->off : b->data;
}
static inline size_t buf_unread(const struct buf *b)
{
	return b->len - b->off;
}
/* Empties the buffer, keeping its memory. */
void buf_reset(struct buf *b);
/* Frees the memory; the buffer is then empty and reusable. */
void buf_free(struct buf *b);

#endif
