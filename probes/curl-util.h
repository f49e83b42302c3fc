/* curl-util.h — cleanup helpers for libcurl's handles, for _cleanup_()
 * (macro.h): common does not link curl, the probes do. Each accepts NULL. */
#pragma once

#include <curl/curl.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(CURL *, curl_easy_cleanup)
DEFINE_TRIVIAL_CLEANUP_FUNC(CURLM *, curl_multi_cleanup)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct curl_slist *, curl_slist_free_all)
