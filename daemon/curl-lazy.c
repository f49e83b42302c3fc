/* curl-lazy.c — goodputd loads libcurl when it first needs it, not at start.
 *
 * libcurl (OpenSSL, GnuTLS through librtmp, Kerberos, LDAP, libssh2,
 * nghttp2, p11-kit ...) is about half of an idle daemon's resident memory
 * (~5 MB of the ~11 MB VmRSS measured with it linked), yet the daemon
 * only needs it while a real trial probes a server: idle, answering
 * queries, or running --dry-run studies it never calls curl. So goodputd —
 * and only goodputd; `goodput` links libcurl normally — is linked with this
 * file, which defines the sixteen curl functions the probe client calls.
 * The linker resolves the probe library's references here, libcurl drops
 * out of the executable's DT_NEEDED (meson links with --as-needed), and the
 * first call dlopen()s libcurl.so.4 and forwards to it from then on.
 *
 * The variadic setters forward by the option's type range, exactly as
 * curl.h defines it (long below CURLOPTTYPE_OBJECTPOINT, curl_off_t in the
 * CURLOPTTYPE_OFF_T range, a pointer otherwise); curl_easy_getinfo always
 * takes a pointer. When libcurl cannot be loaded the functions fail the way
 * curl itself reports failure (NULL handles, CURLE_FAILED_INIT), the trial
 * fails with that message, and the error is logged once.
 *
 * When a study ends, daemon-queue.c calls daemon_curl_unload (declared weak
 * there, so programs without this file link too): with no curl handle left
 * it runs curl_global_cleanup and dlclose()s libcurl, and the libraries only
 * it pulled in go with it (libssl, libcrypto and p11-kit are NODELETE and
 * stay). The next real trial loads it again. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "daemon-internal.h"
#include "log.h"

#define LAZY_CURL_SONAME "libcurl.so.4"

static struct {
	bool tried, ok;
	void *dl;
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *);
	CURLMcode (*multi_add_handle)(CURLM *, CURL *);
	CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
	CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
	CURLMsg *(*multi_info_read)(CURLM *, int *);
	CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
	CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	void (*global_cleanup)(void);
	long live; /* easy and multi handles and slists not yet freed */
} lazy;

#define LAZY_SYM(field, name)                                                                                          \
	do {                                                                                                           \
		*(void **)&lazy.field = dlsym(lazy.dl, name);                                                          \
		if (!lazy.field) {                                                                                     \
			log_error("%s: no symbol %s", LAZY_CURL_SONAME, name);                                         \
			return false;                                                                                  \
		}                                                                                                      \
	} while (0)

static bool lazy_resolve(void)
{
	LAZY_SYM(easy_init, "curl_easy_init");
	LAZY_SYM(easy_cleanup, "curl_easy_cleanup");
	LAZY_SYM(easy_reset, "curl_easy_reset");
	LAZY_SYM(easy_setopt, "curl_easy_setopt");
	LAZY_SYM(easy_getinfo, "curl_easy_getinfo");
	LAZY_SYM(easy_strerror, "curl_easy_strerror");
	LAZY_SYM(multi_init, "curl_multi_init");
	LAZY_SYM(multi_cleanup, "curl_multi_cleanup");
	LAZY_SYM(multi_add_handle, "curl_multi_add_handle");
	LAZY_SYM(multi_remove_handle, "curl_multi_remove_handle");
	LAZY_SYM(multi_assign, "curl_multi_assign");
	LAZY_SYM(multi_info_read, "curl_multi_info_read");
	LAZY_SYM(multi_setopt, "curl_multi_setopt");
	LAZY_SYM(multi_socket_action, "curl_multi_socket_action");
	LAZY_SYM(slist_append, "curl_slist_append");
	LAZY_SYM(slist_free_all, "curl_slist_free_all");
	LAZY_SYM(global_cleanup, "curl_global_cleanup");
	return true;
}

/* Loads libcurl on the first call; false (logged once) when it cannot. */
static bool lazy_load(void)
{
	if (lazy.tried)
		return lazy.ok;
	lazy.tried = true;
	lazy.dl = dlopen(LAZY_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lazy.dl) {
		log_error("loading %s: %s", LAZY_CURL_SONAME, dlerror());
		return false;
	}
	lazy.ok = lazy_resolve();
	if (lazy.ok)
		log_debug("loaded %s", LAZY_CURL_SONAME);
	return lazy.ok;
}

/* A handle exists only if libcurl was loaded, so the functions that take
 * one need not check again. */

void daemon_curl_unload(void)
{
	if (!lazy.dl)
		return;
	if (lazy.live != 0) {
		log_debug("%s stays loaded: %ld handles are alive", LAZY_CURL_SONAME, lazy.live);
		return;
	}
#ifdef __SANITIZE_ADDRESS__
	/* LeakSanitizer's tracer walks the thread-local storage of the
	 * libraries libcurl pulled in; after their dlclose() it crashed with
	 * SIGSEGV at goodputd's exit ("Tracer caught signal 11"), so the
	 * sanitized build keeps libcurl loaded */
	return;
#endif
	if (lazy.ok)
		lazy.global_cleanup();
	(void)dlclose(lazy.dl);
	lazy = (__typeof__(lazy)){ 0 };
	log_debug("unloaded %s", LAZY_CURL_SONAME);
}

CURL *(curl_easy_init)(void)
{
	CURL *h = lazy_load() ? lazy.easy_init() : NULL;

	if (h)
		lazy.live++;
	return h;
}

void(curl_easy_cleanup)(CURL *h)
{
	if (h && lazy.ok) {
		lazy.easy_cleanup(h);
		lazy.live--;
	}
}

void(curl_easy_reset)(CURL *h)
{
	if (h && lazy.ok)
		lazy.easy_reset(h);
}

CURLcode(curl_easy_setopt)(CURL *h, CURLoption opt, ...)
{
	va_list ap;
	CURLcode c;

	if (!lazy_load())
		return CURLE_FAILED_INIT;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		c = lazy.easy_setopt(h, opt, va_arg(ap, long));
	else if (opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB)
		c = lazy.easy_setopt(h, opt, va_arg(ap, curl_off_t));
	else
		c = lazy.easy_setopt(h, opt, va_arg(ap, void *));
	va_end(ap);
	return c;
}

CURLcode(curl_easy_getinfo)(CURL *h, CURLINFO info, ...)
{
	va_list ap;
	CURLcode c;

	if (!lazy_load())
		return CURLE_FAILED_INIT;
	va_start(ap, info);
	c = lazy.easy_getinfo(h, info, va_arg(ap, void *));
	va_end(ap);
	return c;
}

const char *(curl_easy_strerror)(CURLcode c)
{
	return lazy_load() ? lazy.easy_strerror(c) : "libcurl could not be loaded";
}

CURLM *(curl_multi_init)(void)
{
	CURLM *m = lazy_load() ? lazy.multi_init() : NULL;

	if (m)
		lazy.live++;
	return m;
}

CURLMcode(curl_multi_cleanup)(CURLM *m)
{
	CURLMcode c;

	if (!m || !lazy.ok)
		return CURLM_BAD_HANDLE;
	c = lazy.multi_cleanup(m);
	if (c == CURLM_OK)
		lazy.live--;
	return c;
}

CURLMcode(curl_multi_add_handle)(CURLM *m, CURL *h)
{
	return lazy.ok ? lazy.multi_add_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode(curl_multi_remove_handle)(CURLM *m, CURL *h)
{
	return lazy.ok ? lazy.multi_remove_handle(m, h) : CURLM_BAD_HANDLE;
}

CURLMcode(curl_multi_assign)(CURLM *m, curl_socket_t s, void *p)
{
	return lazy.ok ? lazy.multi_assign(m, s, p) : CURLM_BAD_HANDLE;
}

CURLMsg *(curl_multi_info_read)(CURLM *m, int *left)
{
	if (!lazy.ok) {
		*left = 0;
		return NULL;
	}
	return lazy.multi_info_read(m, left);
}

CURLMcode(curl_multi_setopt)(CURLM *m, CURLMoption opt, ...)
{
	va_list ap;
	CURLMcode c;

	if (!lazy.ok)
		return CURLM_BAD_HANDLE;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		c = lazy.multi_setopt(m, opt, va_arg(ap, long));
	else if (opt >= CURLOPTTYPE_OFF_T && opt < CURLOPTTYPE_BLOB)
		c = lazy.multi_setopt(m, opt, va_arg(ap, curl_off_t));
	else
		c = lazy.multi_setopt(m, opt, va_arg(ap, void *));
	va_end(ap);
	return c;
}

CURLMcode(curl_multi_socket_action)(CURLM *m, curl_socket_t s, int ev_bitmask, int *running)
{
	return lazy.ok ? lazy.multi_socket_action(m, s, ev_bitmask, running) : CURLM_BAD_HANDLE;
}

struct curl_slist *(curl_slist_append)(struct curl_slist *l, const char *s)
{
	struct curl_slist *r = lazy_load() ? lazy.slist_append(l, s) : NULL;

	if (r && !l)
		lazy.live++; /* a new list */
	return r;
}

void(curl_slist_free_all)(struct curl_slist *l)
{
	if (l && lazy.ok) {
		lazy.slist_free_all(l);
		lazy.live--;
	}
}
