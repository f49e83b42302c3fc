/* dialect-help.c — goodput-sim's --help: the vLLM dialect's engine and
 * server flags, goodput-sim's own, the faults. (An engine's dialect lists
 * its own flags: dialect-args.c.) */
#include <stdio.h>

#include "dialect-internal.h"
#include "server.h"

void sim_args_help(void)
{
	printf("Usage: goodput-sim [serve] [MODEL] [FLAGS]\n"
	       "       goodput-sim --dialect llamacpp|sglang|tgi|trtllm [THAT ENGINE'S FLAGS]\n"
	       "       goodput-sim simulate [ENGINE FLAGS] [WORKLOAD FLAGS] [--json]   (see simulate --help)\n"
	       "\n"
	       "An emulated inference server: OpenAI-compatible HTTP API whose tokens are paced in\n"
	       "real time by a roofline model of continuous batching on the chosen GPUs. It speaks\n"
	       "vLLM's dialect unless told another (--dialect, or the program name llama-server,\n"
	       "text-generation-launcher, trtllm-serve, vllm, or python3 -m sglang.launch_server):\n"
	       "that engine's flags, /health while loading, /metrics names, start-up and out-of-memory\n"
	       "log lines, --version and streaming quirks. It prints one line \"goodput-sim: listening\n"
	       "on http://HOST:PORT\" once its port is bound (see goodput-sim(1)).\n"
	       "\n"
	       "Engine flags (vLLM's names, the vllm dialect):\n");
	sim_engine_flags_help(stdout);
	printf("  (default --load-time-scale for serve: %g, so start-up takes well under a second)\n"
	       "\n"
	       "Server flags (vllm dialect):\n"
	       "  --host ADDR                   address to bind (default 127.0.0.1)\n"
	       "  --port N                      port; 0 = any free port (default 8000)\n"
	       "  --served-model-name NAME      the model name clients must send (default: --model)\n"
	       "\n"
	       "goodput-sim's own flags (every dialect):\n"
	       "  --dialect NAME                vllm (default), llamacpp, sglang, tgi, trtllm\n"
	       "  --gpu NAME, --gpus N          the emulated GPU and how many the host has\n"
	       "  --gpu-ledger DIR              GPUs shared by the sims of a host: one lock per GPU index in\n"
	       "                                DIR (default: $GOODPUT_SIM_GPU_LEDGER; none when unset); a GPU\n"
	       "                                held by another sim is busy. CUDA_VISIBLE_DEVICES names them\n"
	       "  --load-time SECONDS           start-up delay, overriding the modelled one\n"
	       "  --trace FILE                  JSONL, one line per completion: id, arrival_usec and\n"
	       "                                tokens [[scheduled_usec, sent_usec], ...] (CLOCK_MONOTONIC)\n"
	       "  --max-connections N           concurrent connections; a request past them gets 503\n"
	       "                                (default %u)\n"
	       "  --max-request-bytes N         largest request body; larger gets 413 (default %u)\n"
	       "  --max-buffered-bytes N        request bodies of all connections together; a body that\n"
	       "                                would pass it closes its connection (default %u)\n"
	       "  --idle-timeout SECONDS        a connection's next request line must come within this\n"
	       "                                (default %d; near --max-connections the longest-idle\n"
	       "                                connections are closed first)\n"
	       "  --header-timeout SECONDS      ... its headers within this after the request line (default %d)\n"
	       "  --body-timeout SECONDS        ... its body within this after the headers (default %d);\n"
	       "                                0 turns a timeout off\n"
	       "  --fixed-itl-ms MS             benchmark mode: ignore the engine model, send one token\n"
	       "                                every MS ms per stream (first after MS)\n"
	       "  -v, --verbose                 debug logging\n"
	       "  -h, --help                    this text\n"
	       "  --version                     the version (the engine's, when a dialect is named)\n"
	       "\n"
	       "Fault injection (off by default):\n"
	       "  --fault-crash-after N         die by SIGKILL on the completion request after N\n"
	       "  --fault-hang-after N          stop answering anything after N completion requests\n"
	       "  --fault-fail-startup          fail after the load delay with vLLM's engine-init error\n"
	       "  --fault-http500 FRACTION      answer this fraction of completions with HTTP 500\n"
	       "  --fault-bad-sse FRACTION      this fraction of streams gets a malformed chunk halfway\n"
	       "                                through and ends without [DONE]\n"
	       "  --fault-jitter SIGMA          extra log-normal jitter (sigma) of every step time\n"
	       "  --fault-step-overhead-ms MS   extra cost of every step, outside the performance model\n",
	       SIM_DEFAULT_LOAD_TIME_SCALE, SIM_SERVER_DEFAULT_MAX_CONNECTIONS, SIM_SERVER_DEFAULT_MAX_BODY,
	       SIM_SERVER_DEFAULT_MAX_BUFFERED, SIM_SERVER_DEFAULT_IDLE_SEC, SIM_SERVER_DEFAULT_HEADER_SEC,
	       SIM_SERVER_DEFAULT_BODY_SEC);
}
