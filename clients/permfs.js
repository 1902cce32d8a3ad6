'use strict';
/**
 * permfs.js: ask a permfs mount from Node.js without stalling the process.
 * CommonJS, no dependencies, Node 16+ (AbortSignal). ESM: permfs.mjs.
 *
 *   const { ask } = require('./clients/permfs.js');
 *   const answer = await ask('/mnt/permfs/sessions/main', {surface: 'bash', value: 'make'});
 *   if (answer.approved) { ... }
 *
 * Contract
 *   ask(sessionDir, request, {signal, rid}) -> Promise<response object>
 *   - request: an object (sent as JSON) or a JSON string.
 *   - Resolves with the parsed response for every decided ask: allow, deny,
 *     timeout, cancelled, invalid, ... Check `approved` (true only for an
 *     allow); `outcome` says why not.
 *   - Rejects only when it could not ask or read an answer (no such session:
 *     ENOENT, not the session's asker: EACCES, no /bin/sh, a response that
 *     is not JSON), and with signal.reason (an AbortError) when `signal`
 *     aborts. Aborting withdraws the ask: it leaves the decider's inbox and
 *     is answered `cancelled`.
 *   - When the Node process ends in any way (process.exit, a crash,
 *     SIGKILL), its pending asks are withdrawn within milliseconds.
 *
 * Why it is built this way
 *   A response read blocks until someone decides, minutes perhaps. Node runs
 *   fs calls on libuv's thread pool (4 threads by default, shared with
 *   fs.readFile, fs.stat, dns.lookup, crypto.pbkdf2, zlib): 4 pending
 *   fs.read()s of responses stall every other fs call in the process, and
 *   with more pending than threads an answer already given stays unread
 *   until a thread frees. readFileSync freezes the event loop. A
 *   worker_threads worker blocked in read(2) never reaches a point where it
 *   can be stopped, and process.exit() joins workers: it hangs until the ask
 *   is decided. And Node cannot poll() a regular file's descriptor.
 *
 *   So the blocking read happens in another process. The one-descriptor ask
 *   (outbox/<rid>, opened O_RDWR|O_CREAT|O_EXCL) is created and written here
 *   with sync calls that return at once (the daemon only buffers the bytes;
 *   nothing waits for a decision), then handed to `/bin/sh` as its fd 3:
 *   `cat` reads the answer (its first read asks) into a pipe that the event
 *   loop watches with epoll, like a socket. No thread waits. The shell, in
 *   its own session (no terminal Ctrl-C reaches it), waits for its stdin
 *   pipe to close: when this process ends or the ask is aborted, it kills
 *   `cat`, the last descriptor of the ask closes, and the daemon withdraws
 *   it. Cost: two small processes per pending ask, a few ms to start them.
 *
 *   If you write your own client instead: never read a response with
 *   fs.read/fs.promises.readFile (thread pool) or readFileSync (event loop);
 *   raising UV_THREADPOOL_SIZE only moves the limit.
 */

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { spawn } = require('child_process');

// fd 3 is the ask. `cat` reads its answer to stdout (the only holder of the
// answer pipe once the shell lets go of it); the shell waits for stdin to
// close, then kills `cat` (a no-op when it has finished).
const WAITER = 'cat <&3 3<&- & exec 3<&- >/dev/null; read -r _; kill $! 2>/dev/null; exit 0';

/** Retries a sync fs call interrupted by a signal (EINTR). */
function retrying(call) {
  for (;;) {
    try {
      return call();
    } catch (error) {
      if (error.code !== 'EINTR') throw error;
    }
  }
}

function abortError(signal) {
  if (signal.reason !== undefined) return signal.reason;
  const error = new Error('The ask was aborted');
  error.name = 'AbortError';
  return error;
}

/** Creates the one-descriptor ask and writes the request; returns the fd. */
function openAsk(sessionDir, rid, bytes) {
  const file = path.join(sessionDir, 'outbox', rid);
  const flags = fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL;
  const fd = retrying(() => fs.openSync(file, flags, 0o600));
  try {
    let done = 0;
    while (done < bytes.length) {
      done += retrying(() => fs.writeSync(fd, bytes, done, bytes.length - done));
    }
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
  return fd;
}

/**
 * Asks `request` as the session at `sessionDir` and resolves with the
 * response. Options: `signal` (an AbortSignal: aborting withdraws the ask),
 * `rid` (the request name; a unique one by default).
 */
function ask(sessionDir, request, options = {}) {
  const { signal, rid = `node-${process.pid}-${crypto.randomBytes(8).toString('hex')}` } = options;
  return new Promise((resolve, reject) => {
    if (signal && signal.aborted) return reject(abortError(signal));
    const text = typeof request === 'string' ? request : JSON.stringify(request);
    let child;
    const fd = openAsk(sessionDir, rid, Buffer.from(text));
    try {
      child = spawn('/bin/sh', ['-c', WAITER], {
        stdio: ['pipe', 'pipe', 'pipe', fd],
        detached: true,
      });
    } finally {
      // The shell holds the ask now; closing our copy sends nothing to the
      // daemon (an ask's last close is what withdraws it).
      fs.closeSync(fd);
    }
    const out = [];
    const err = [];
    let settled = false;
    const stop = () => {
      // The whole group: the shell and `cat`.
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch (_) {
        // already gone
      }
    };
    const onAbort = () => {
      if (settled) return;
      settled = true;
      stop();
      reject(abortError(signal));
    };
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    const finish = (error, value) => {
      if (signal) signal.removeEventListener('abort', onAbort);
      if (settled) return;
      settled = true;
      if (error) reject(error);
      else resolve(value);
    };
    child.stdin.on('error', () => {}); // the shell may be gone already
    child.stdout.on('data', (chunk) => out.push(chunk));
    child.stderr.on('data', (chunk) => err.push(chunk));
    child.stdout.on('end', () => child.stdin.end());
    child.on('error', (error) => {
      stop();
      finish(error);
    });
    child.on('close', () => {
      const answer = Buffer.concat(out).toString();
      try {
        finish(null, JSON.parse(answer));
      } catch (_) {
        const why = Buffer.concat(err).toString().trim() || `not JSON: ${JSON.stringify(answer)}`;
        finish(new Error(`permfs: no answer to ${rid}: ${why}`));
      }
    });
  });
}

module.exports = { ask };
