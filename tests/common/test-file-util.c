/* File helpers at a trust boundary: user-named files of the wrong type are
 * refused without waiting on them, UTF-8 is checked strictly, and the
 * writer's lock keeps a second writer out. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "file-util.h"
#include "json-util.h"
#include "lock-file.h"
#include "macro.h"
#include "tests.h"
#include "utf8.h"

static char dir[] = "/tmp/goodput-file-util-XXXXXX";

static const char *path_in(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	CHECK(f);
	fputs(text, f);
	fclose(f);
}

/* A FIFO with no writer must be refused at once: before the fix, open()
 * blocked until a writer came (forever). alarm() turns a hang into a failure. */
static void test_fifo_and_devices(void)
{
	struct error err = { 0 };
	cJSON *j = NULL;
	char *buf = NULL;
	size_t len;
	int fd;

	CHECK(mkfifo(path_in("fifo"), 0600) == 0);
	alarm(5);
	CHECK_INT_EQ(file_open_regular(path_in("fifo"), 0, &fd, NULL, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "not a regular file (a FIFO)");
	CHECK_INT_EQ(json_parse_file(path_in("fifo"), 1024, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "a FIFO");
	CHECK_INT_EQ(file_read_regular("/dev/zero", 0, 1024, &buf, &len, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "a character device");
	CHECK_INT_EQ(file_read_regular(dir, 0, 1024, &buf, &len, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "a directory");
	CHECK_INT_EQ(file_read_regular(path_in("missing"), 0, 1024, &buf, &len, &err), -ENOENT);
	alarm(0);
	CHECK(j == NULL && buf == NULL);
}

static void test_read(void)
{
	struct error err = { 0 };
	char *buf = NULL;
	size_t len;

	write_file(path_in("a.txt"), "hello\n");
	CHECK_INT_EQ(file_read_regular(path_in("a.txt"), 0, 6, &buf, &len, &err), 0);
	CHECK_INT_EQ(len, 6);
	CHECK_STR_EQ(buf, "hello\n");
	free(buf);
	CHECK_INT_EQ(file_read_regular(path_in("a.txt"), 0, 5, &buf, &len, &err), -EFBIG);
	CHECK_STR_CONTAINS(err.msg, "larger than 5 bytes");

	/* procfs files announce size 0: read them to the end anyway. */
	CHECK_INT_EQ(file_read_regular("/proc/self/status", 0, 1 << 20, &buf, &len, &err), 0);
	CHECK(len > 100 && strstr(buf, "Pid:"));
	free(buf);

	/* Symbolic links: followed by default, refused with FILE_NOFOLLOW. */
	CHECK(symlink(path_in("a.txt"), path_in("link")) == 0);
	CHECK_INT_EQ(file_read_regular(path_in("link"), 0, 100, &buf, &len, &err), 0);
	free(buf);
	CHECK_INT_EQ(file_read_regular(path_in("link"), FILE_NOFOLLOW, 100, &buf, &len, &err), -ELOOP);
	CHECK_STR_CONTAINS(err.msg, "symbolic link");
}

static void test_utf8(void)
{
	static const struct {
		const char *s;
		size_t bad; /* offset of the first invalid byte, SIZE_MAX: valid */
	} cases[] = {
		{ "plain ascii", SIZE_MAX },
		{ "gr\xC3\xBC\xC3\x9F", SIZE_MAX },            /* grüß */
		{ "\xE2\x82\xAC \xF0\x9F\x98\x80", SIZE_MAX }, /* € 😀 */
		{ "\xEF\xBF\xBF", SIZE_MAX },                  /* U+FFFF */
		{ "\xF4\x8F\xBF\xBF", SIZE_MAX },              /* U+10FFFF */
		{ "ab\xFF", 2 },
		{ "\xC0\xAF", 0 },             /* overlong '/' */
		{ "\xE0\x80\xAF", 0 },         /* overlong */
		{ "x\xED\xA0\x80", 1 },        /* surrogate U+D800 */
		{ "\xF4\x90\x80\x80", 0 },     /* above U+10FFFF */
		{ "\xE2\x82", 0 },             /* truncated */
		{ "ok\x80", 2 },               /* lone continuation */
		{ "\xF0\x9F\x98\x80\xC3", 4 }, /* valid, then truncated */
	};
	char *s;

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		size_t len = strlen(cases[i].s), want = cases[i].bad == SIZE_MAX ? len : cases[i].bad;

		CHECK_MSG(utf8_invalid_offset(cases[i].s, len) == want, "case %zu", i);
	}
	/* Long ASCII runs are checked eight bytes at a time: a bad byte at every
	 * offset of a word, and a length that ends inside the text. */
	for (size_t at = 0; at < 40; at++) {
		char buf[48];

		memset(buf, 'a', sizeof(buf));
		buf[at] = '\x80';
		CHECK_MSG(utf8_invalid_offset(buf, sizeof(buf)) == at, "bad byte at %zu", at);
		CHECK_MSG(utf8_invalid_offset(buf, at) == at, "length %zu, before the bad byte", at);
		buf[at] = '\xC3';
		buf[at + 1] = '\xBC';
		CHECK_MSG(utf8_is_valid(buf, sizeof(buf)), "u-umlaut at %zu", at);
		CHECK_MSG(utf8_invalid_offset(buf, at + 1) == at, "u-umlaut cut at %zu", at);
	}
	s = utf8_sanitize("a\xFF"
			  "b\xED\xA0\x80"
			  "c\xC3\xBC");
	CHECK(s);
	CHECK_STR_EQ(s, "a\xEF\xBF\xBD"
			"b\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
			"c\xC3\xBC");
	CHECK(utf8_is_valid(s, strlen(s)));
	free(s);

	CHECK(!utf8_has_control("label 128/16 \xC3\xBC"));
	CHECK(utf8_has_control("two\nlines"));
	CHECK(utf8_has_control("tab\there"));
	CHECK(utf8_has_control("esc\x1B[31m"));
	CHECK(utf8_has_control("del\x7F"));
	CHECK(utf8_has_control("c1 \xC2\x9B"));
	CHECK(!utf8_has_control("nbsp \xC2\xA0"));
}

/* JSON input: invalid UTF-8 is refused with its position; escapes that
 * would decode to invalid UTF-8 (lone surrogates) too. */
static void test_json_utf8(void)
{
	static const char bad[] = "{\"label\": \"a\xFF\"}", bad2[] = "{\"a\": 1,\n \"b\": \"\xC0\xAF\"}",
			  lone[] = "{\"label\": \"\\udc00\"}", good[] = "\"gr\xC3\xBC\xC3\x9F\"";
	struct error err = { 0 };
	cJSON *j = NULL;

	CHECK_INT_EQ(json_parse_strict("request", bad, sizeof(bad) - 1, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "request: invalid UTF-8 at line 1, column 13");
	CHECK_INT_EQ(json_parse_strict("spec.json", bad2, sizeof(bad2) - 1, &j, &err), -EINVAL);
	CHECK_STR_CONTAINS(err.msg, "spec.json: invalid UTF-8 at line 2, column 8");
	CHECK(json_parse_strict("request", lone, sizeof(lone) - 1, &j, &err) < 0);
	CHECK(j == NULL);
	CHECK_INT_EQ(json_parse_strict("ok", good, sizeof(good) - 1, &j, &err), 0);
	cJSON_Delete(j);
}

static int wait_child(pid_t pid)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* In a child: 0 when it got the lock on path's file, 1 when it was busy
 * and named holder. */
static int try_lock_in_child(const char *path, pid_t holder)
{
	pid_t pid = fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct lock_holder h;
		int fd = open(path, O_RDWR | O_CLOEXEC), r;

		if (fd < 0)
			_exit(3);
		r = lock_inode_take(fd, &h);
		if (r == 0)
			_exit(0);
		if (r == -EBUSY && h.pid == holder && h.comm[0])
			_exit(1);
		fprintf(stderr, "unexpected: %d (holder %d)\n", r, (int)h.pid);
		_exit(2);
	}
	return wait_child(pid);
}

static void test_write_all(void)
{
	size_t len = 1 << 20;
	char *buf = malloc(len);
	int fd[2];
	pid_t pid;
	int status;

	CHECK(buf);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 7);
	CHECK(pipe(fd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		size_t got = 0, bad = 0;
		char chunk[4096];
		ssize_t k;

		close(fd[1]);
		while ((k = read(fd[0], chunk, sizeof(chunk))) > 0) {
			for (ssize_t i = 0; i < k; i++)
				bad += chunk[i] != (char)((got + (size_t)i) * 7);
			got += (size_t)k;
		}
		free(buf);
		_exit(got == len && bad == 0 ? 0 : 1);
	}
	close(fd[0]);
	CHECK_INT_EQ(fd_write_all(fd[1], buf, len), 0);
	close(fd[1]);
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader did not get the 1 MiB intact");

	signal(SIGPIPE, SIG_IGN);
	CHECK(pipe(fd) == 0);
	close(fd[0]);
	CHECK_INT_EQ(fd_write_all(fd[1], buf, len), -EPIPE);
	close(fd[1]);
	signal(SIGPIPE, SIG_DFL);
	free(buf);
}

/* The names in the test folder other than "." and "..", counted. */
static int entries(const char *d)
{
	DIR *dp = opendir(d);
	struct dirent *e;
	int n = 0;

	CHECK(dp);
	while ((e = readdir(dp)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(dp);
	return n;
}

static void check_content(const char *path, const char *want)
{
	char *text = NULL;
	size_t len = 0;

	CHECK_INT_EQ(file_read_regular(path, 0, 4 << 20, &text, &len, NULL), 0);
	CHECK_INT_EQ(len, strlen(want));
	CHECK_STR_EQ(text, want);
	free(text);
}

/* A replaced file holds all of the new bytes with the mode asked for,
 * whatever the umask; a failure leaves the old file and nothing else. */
static void test_write_atomic(void)
{
	char sub[300], target[320];
	size_t big_len = 3 << 20;
	char *big = malloc(big_len + 1);
	struct rlimit lim, small;
	struct stat st;
	mode_t old_umask;

	CHECK(big);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char)('a' + i % 26);
	big[big_len] = '\0';
	snprintf(sub, sizeof(sub), "%s/atomic", dir);
	snprintf(target, sizeof(target), "%s/out.prom", sub);
	CHECK(mkdir(sub, 0755) == 0);

	old_umask = umask(077);
	CHECK_INT_EQ(file_write_atomic(target, "first\n", 6, 0644, 0), 0);
	CHECK(stat(target, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0644);
	check_content(target, "first\n");
	/* Replaced whole, 3 MiB, with another mode and an fsync. */
	CHECK_INT_EQ(file_write_atomic(target, big, big_len, 0755, FILE_WRITE_SYNC), 0);
	CHECK(stat(target, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0755);
	check_content(target, big);
	/* With FILE_WRITE_UMASK the umask has its say, as open's mode. */
	CHECK_INT_EQ(file_write_atomic(target, "umask\n", 6, 0666, FILE_WRITE_UMASK), 0);
	CHECK(stat(target, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0600);
	umask(022);
	CHECK_INT_EQ(file_write_atomic(target, "second\n", 7, 0666, FILE_WRITE_UMASK), 0);
	CHECK(stat(target, &st) == 0);
	CHECK_INT_EQ(st.st_mode & 07777, 0644);
	check_content(target, "second\n");
	umask(old_umask);
	CHECK_INT_EQ(entries(sub), 1);

	/* A write that fails half way (the file size limit): the old file
	 * stays, the temporary one is gone. */
	CHECK(getrlimit(RLIMIT_FSIZE, &lim) == 0);
	small = lim;
	small.rlim_cur = 4096;
	signal(SIGXFSZ, SIG_IGN);
	CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
	CHECK_INT_EQ(file_write_atomic(target, big, big_len, 0644, 0), -EFBIG);
	CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
	signal(SIGXFSZ, SIG_DFL);
	check_content(target, "second\n");
	CHECK_INT_EQ(entries(sub), 1);

	/* The target a directory: the rename fails, nothing is left behind. */
	snprintf(target, sizeof(target), "%s/adir", sub);
	CHECK(mkdir(target, 0755) == 0);
	CHECK_INT_EQ(file_write_atomic(target, "x", 1, 0644, 0), -EISDIR);
	CHECK(stat(target, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK_INT_EQ(entries(sub), 2);
	CHECK(rmdir(target) == 0);

	/* A folder that cannot be written to (root writes anywhere: skipped). */
	snprintf(target, sizeof(target), "%s/out.prom", sub);
	if (geteuid() != 0) {
		CHECK(chmod(sub, 0555) == 0);
		CHECK_INT_EQ(file_write_atomic(target, "x", 1, 0644, 0), -EACCES);
		CHECK(chmod(sub, 0755) == 0);
		check_content(target, "second\n");
		CHECK_INT_EQ(entries(sub), 1);
	}
	/* A folder that does not exist. */
	snprintf(target, sizeof(target), "%s/nowhere/out.prom", sub);
	CHECK_INT_EQ(file_write_atomic(target, "x", 1, 0644, 0), -ENOENT);

	snprintf(target, sizeof(target), "%s/out.prom", sub);
	CHECK(unlink(target) == 0);
	CHECK(rmdir(sub) == 0);
	free(big);
}

/* The writer's lock is on the file, not on a path: every name of it —
 * a symlink, a hard link — meets it, another process is kept out and told
 * who holds it, and it is free once the holder closes it. */
static void test_lock(void)
{
	const char *path = path_in("lock.db"), *sym = path_in("lock-sym.db"), *hard = path_in("lock-hard.db");
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	CHECK(symlink(path, sym) == 0);
	CHECK(link(path, hard) == 0);
	CHECK_INT_EQ(lock_inode_take(fd, NULL), 0);
	CHECK_INT_EQ(try_lock_in_child(path, getpid()), 1);
	CHECK_INT_EQ(try_lock_in_child(sym, getpid()), 1);
	CHECK_INT_EQ(try_lock_in_child(hard, getpid()), 1);
	close(fd);
	CHECK_INT_EQ(try_lock_in_child(hard, 0), 0);
	CHECK(unlink(sym) == 0 && unlink(hard) == 0 && unlink(path) == 0);
}

/* goodput's own programs: beside the running one first, else in bindir
 * when executable there, else left to $PATH (-ENOENT). */
static void test_own_program(void)
{
	char self[4096], *p = NULL;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *slash;

	CHECK(n > 0);
	self[n] = '\0';
	slash = strrchr(self, '/');
	CHECK(slash);
	/* this test program is beside itself */
	CHECK(file_find_own_program(slash + 1, dir, &p) == 0);
	CHECK_STR_EQ(p, self);
	free(p);

	write_file(path_in("own-prog"), "#!/bin/sh\n");
	CHECK(file_find_own_program("own-prog", dir, &p) == -ENOENT); /* not executable */
	CHECK(chmod(path_in("own-prog"), 0755) == 0);
	CHECK(file_find_own_program("own-prog", dir, &p) == 0);
	CHECK_STR_EQ(p, path_in("own-prog"));
	free(p);
	CHECK(file_find_own_program("own-prog", NULL, &p) == -ENOENT);
	CHECK(mkdir(path_in("own-dir"), 0755) == 0); /* a folder is no program */
	CHECK(file_find_own_program("own-dir", dir, &p) == -ENOENT);
	CHECK(rmdir(path_in("own-dir")) == 0);
}

int main(void)
{
	CHECK(mkdtemp(dir));
	test_own_program();
	test_fifo_and_devices();
	test_read();
	test_utf8();
	test_json_utf8();
	test_lock();
	test_write_all();
	test_write_atomic();
	for (const char *const *n = (const char *const[]){ "fifo", "a.txt", "link", "own-prog", NULL }; *n; n++)
		(void)unlink(path_in(*n));
	CHECK(rmdir(dir) == 0);
	return 0;
}
