/* SPDX-License-Identifier: Apache-2.0 */
/* ascii: character helpers that must not depend on the locale (<ctype.h> does). Header only. */
#ifndef KVS_ASCII_H
#define KVS_ASCII_H

/* The value of hex digit c (0-9, a-f, A-F), or -1. */
static inline int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
