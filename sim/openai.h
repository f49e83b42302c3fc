/* openai.h — the OpenAI-compatible request and response formats of goodput-sim.
 *
 * Parses the JSON bodies of POST /v1/completions and /v1/chat/completions
 * into what the engine needs (prompt token ids, max_tokens, streaming
 * options), and formats the SSE chunks, the non-streaming responses and the
 * OpenAI-style errors ({"error": {"message", "type", "param", "code"}}).
 * Pure functions: no I/O, no clock.
 *
 * The word rule (probes/workload.h): a text's length in tokens is its number
 * of whitespace-separated words. A word "w<digits>" is the token id <digits>
 * (the probe's text form of a token-id prompt); any other word maps to an id
 * by a hash, so equal texts give equal ids and prefix caching sees them.
 * Generated text is one word " w<id>" per token. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define SIM_API_MAX_PROMPT_TOKENS (1u << 20)

enum sim_api_kind {
	SIM_API_COMPLETIONS,
	SIM_API_CHAT,
};

struct sim_api_request {
	enum sim_api_kind kind;
	char *model;          /* as sent, or NULL when omitted */
	uint32_t *prompt_ids; /* n_prompt ids */
	size_t n_prompt;
	bool has_max_tokens; /* max_tokens (or max_completion_tokens) was given */
	uint32_t max_tokens;
	bool stream;
	bool include_usage; /* stream_options.include_usage */
	bool ignore_eos;
	/* disaggregated serving: vLLM's kv_transfer_params as its proxy sends them */
	bool kv_remote_decode;  /* prefill here, the KV for a decode worker (do_remote_decode) */
	bool kv_remote_prefill; /* the KV comes from a prefill worker (do_remote_prefill) */
	uint32_t kv_remote_tp;  /* that worker's TP (tp_size; 0: not said) */
};

/* Parses a request body. On a client error returns -EINVAL (or -E2BIG for a
 * prompt over SIM_API_MAX_PROMPT_TOKENS) with err naming the field; the
 * caller answers 400. On success *ret owns its strings/arrays: release with
 * sim_api_request_done(). */
int sim_api_parse_request(enum sim_api_kind kind, const char *body, size_t len, struct sim_api_request *ret,
			  struct error *err);
void sim_api_request_done(struct sim_api_request *r);

/* Number of words of text (the word rule), and the token id of one word. */
uint32_t sim_api_count_words(const char *text);
uint32_t sim_api_word_id(const char *word, size_t len);

/* Formats an OpenAI/vLLM-style error body into a new string (caller frees),
 * e.g. type "BadRequestError", status 400. NULL on allocation failure. */
char *sim_api_error_json(const char *message, const char *type, const char *param, unsigned status);

/* Escapes s as a JSON string body (no quotes) into a new string. */
char *sim_api_json_escape(const char *s);

/* Per-response constants the chunk formatters share. model_json is the
 * served name already JSON-escaped. */
struct sim_api_stream {
	enum sim_api_kind kind;
	uint64_t id;
	uint64_t created; /* unix seconds */
	const char *model_json;
};

/* Writes one SSE event "data: {...}\n\n" for one generated token into buf
 * (size bytes). first marks the first token (chat: carries the role),
 * finish_reason is NULL or "length"/"stop". Returns the length written, or
 * -ENOBUFS when it does not fit (nothing usable written). */
int sim_api_format_token_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint32_t token_id, bool first,
			       const char *finish_reason);
/* The usage chunk (choices: []) sent when stream_options.include_usage. */
int sim_api_format_usage_chunk(char *buf, size_t size, const struct sim_api_stream *s, uint64_t prompt_tokens,
			       uint64_t completion_tokens);
/* A non-streaming response holding all tokens; a new string the caller frees. */
char *sim_api_format_response(const struct sim_api_stream *s, const uint32_t *token_ids, size_t n_tokens,
			      const char *finish_reason, uint64_t prompt_tokens);
