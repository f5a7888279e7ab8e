#pragma once
// baton as a zygote for the test suites: a `baton` process started with
// BATON_TEST_ZYGOTE=SOCKET loads its libraries once (LibTorch's ~300 shared
// libraries and operator registry: ~0.55 s of CPU a start) and then, for each
// request on the Unix socket SOCKET, forks a child that runs the command the
// request names, as `baton ARGS...` would from a fresh exec: its own process
// group, the request's standard streams, working directory and environment,
// and it ends with SIGTERM if the zygote dies. The suites start most `baton`
// commands this way (tests/support/commands.cpp); docs/tests.md says which.
//
// The protocol, one connection per command (tests/support/zygote.cpp is the
// client): the client sends a 4-byte length and, with it, three descriptors
// (SCM_RIGHTS: stdin, stdout, stderr), then that many bytes of NUL-ended
// strings: the working directory, the argument count, the arguments (argv[0]
// first), then the environment. The zygote answers the child's pid (4 bytes)
// and, when the child has ended, its wait status (4 bytes) and peak resident
// set in KiB (8 bytes).

namespace baton::apps {

/// The command's body: what `main` runs in a fresh process.
using command_main = int (*)(int argc, char** argv);

/// Serves requests on the Unix socket `socket_path` until the process that
/// started the zygote ends (or the zygote is killed); each request runs
/// `body` in a forked child. Returns 1 when the socket cannot be made.
/// Single-threaded: nothing runs in the zygote but this loop, so a fork
/// copies no thread's half-done work.
int serve_zygote(const char* socket_path, command_main body);

} // namespace baton::apps
