// SPDX-License-Identifier: Apache-2.0
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

static enum log_level log_level = LOG_INFO;
static const char *const log_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level lvl)
{
	log_level = lvl;
}

int log_parse_level(const char *s)
{
	for (int i = 0; i <= LOG_DEBUG; i++)
		if (strcmp(s, log_names[i]) == 0)
			return i;
	return -1;
}

void log_msg(enum log_level lvl, const char *comp, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n;

	if (lvl > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %-5s %s: ", tm.tm_hour, tm.tm_min,
		     tm.tm_sec, ts.tv_nsec / 1000000, log_names[lvl], comp);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s\n", line);
}
