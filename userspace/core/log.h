/* SPDX-License-Identifier: Apache-2.0 */
/* log: one line per message on stderr, "LEVEL component: text". The level threshold is global
 * (set once at start-up from flags); logging never blocks the event loop for long (stderr is
 * line-buffered and small). */
#ifndef KVS_LOG_H
#define KVS_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Sets the most verbose level printed (default LOG_INFO). */
void log_set_level(enum log_level lvl);
/* Parses "error|warn|info|debug"; returns -1 on anything else. */
int log_parse_level(const char *s);
void log_msg(enum log_level lvl, const char *comp, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_error(comp, ...) log_msg(LOG_ERROR, comp, __VA_ARGS__)
#define log_warn(comp, ...) log_msg(LOG_WARN, comp, __VA_ARGS__)
#define log_info(comp, ...) log_msg(LOG_INFO, comp, __VA_ARGS__)
#define log_debug(comp, ...) log_msg(LOG_DEBUG, comp, __VA_ARGS__)

#endif
