/* utf8.c — see utf8.h. The decoder follows the table of well-formed byte
 * sequences in the Unicode standard (§3.9, table 3-7). */
#include "utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence starting at s (at most len bytes left), or 0. */
static size_t seq_len(const unsigned char *s, size_t len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t n;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		n = 2;
	else if (c >= 0xE0 && c <= 0xEF) {
		n = 3;
		if (c == 0xE0)
			lo = 0xA0; /* overlong */
		else if (c == 0xED)
			hi = 0x9F; /* surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4;
		if (c == 0xF0)
			lo = 0x90; /* overlong */
		else if (c == 0xF4)
			hi = 0x8F; /* above U+10FFFF */
	} else
		return 0;
	if (len < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return n;
}

size_t utf8_invalid_offset(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n;

		if (p[i] < 0x80) {
			uint64_t w;

			/* Runs of ASCII, most of what crosses the socket, eight bytes at a time. */
			while (len - i >= sizeof(w) && (memcpy(&w, p + i, sizeof(w)), (w & 0x8080808080808080ULL) == 0))
				i += sizeof(w);
			if (i < len && p[i] < 0x80)
				i++;
			continue;
		}
		n = seq_len(p + i, len - i);
		if (n == 0)
			return i;
		i += n;
	}
	return len;
}

char *utf8_sanitize(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s), o = 0;
	char *out;

	/* Each bad byte becomes the 3 bytes of U+FFFD. */
	if (len > (SIZE_MAX - 1) / 3)
		return NULL;
	out = malloc(len * 3 + 1);
	if (!out)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t n = seq_len(p + i, len - i);

		if (n == 0) {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(out + o, p + i, n);
		o += n;
		i += n;
	}
	out[o] = '\0';
	return out;
}

bool utf8_has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7F)
			return true;
		if (*p == 0xC2 && p[1] >= 0x80 && p[1] <= 0x9F)
			return true;
	}
	return false;
}
