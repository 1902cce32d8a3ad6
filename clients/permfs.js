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
 *   So the blocking read happens in another process. The request is written
 *   as outbox/<rid>.request with sync calls that return at once (closing it
 *   asks; nothing waits for a decision). Most asks are answered by a rule
 *   at once: a non-blocking read of <rid>.response (O_NONBLOCK: the answer
 *   or EAGAIN, never a wait) returns those without a process. Otherwise
 *   `/bin/sh` starts `cat <rid>.response`, whose output is a pipe the event
 *   loop watches with epoll, like a socket: no thread waits. The shell, in
 *   its own session (a terminal's Ctrl-C does not reach it), then waits for
 *   its stdin pipe to close; when this process ends in any way or the ask is
 *   aborted, it kills `cat` and removes the request, which withdraws a
 *   pending ask. A finished ask's request is removed too (the daemon then
 *   forgets it). Cost: two small processes while an ask waits (about 10 ms
 *   to start them); a rule's answer costs about 1 ms.
 *
 *   Signals: the only read that waits is `cat`'s, which retries EINTR; the
 *   sync calls here never wait for a decision, and are retried on EINTR all
 *   the same.
 *
 *   If you write your own client instead: never read a response with
 *   fs.read/fs.promises.readFile (thread pool) or readFileSync (event loop);
 *   raising UV_THREADPOOL_SIZE only moves the limit.
 */

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');
const { spawn } = require('child_process');

// $1 the response, $2 the request. `cat` reads the answer to stdout (the
// only holder of the answer pipe once the shell lets go of it); the shell
// waits for stdin to close, then stops `cat` (a no-op when it has finished)
// and removes the request (withdrawing the ask if it is still pending).
const WAITER = 'cat "$1" & exec >/dev/null; read -r _; kill $! 2>/dev/null; rm -f "$2"';

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

function forget(request) {
  try {
    fs.unlinkSync(request);
  } catch (_) {
    // already gone
  }
}

/** Writes the request; closing it asks. */
function writeRequest(request, text) {
  try {
    fs.writeFileSync(request, text, { flag: 'wx', mode: 0o600 });
  } catch (error) {
    // EINVAL: an invalid request; its response says why.
    if (error.code === 'EINVAL' && error.syscall === 'close') return;
    if (error.code !== 'EEXIST') forget(request);
    throw error;
  }
}

/** The answer if there is one yet (a non-blocking read), else null. */
function answerNow(response) {
  const fd = retrying(() => fs.openSync(response, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK));
  try {
    const chunks = [];
    const buffer = Buffer.alloc(65536);
    for (;;) {
      let n;
      try {
        n = retrying(() => fs.readSync(fd, buffer));
      } catch (error) {
        if (error.code === 'EAGAIN') return null;
        throw error;
      }
      if (n === 0) return Buffer.concat(chunks).toString();
      chunks.push(Buffer.from(buffer.subarray(0, n)));
    }
  } finally {
    fs.closeSync(fd);
  }
}

function parse(rid, answer, why) {
  try {
    return JSON.parse(answer);
  } catch (_) {
    throw new Error(`permfs: no answer to ${rid}: ${why || `not JSON: ${JSON.stringify(answer)}`}`);
  }
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
    const base = path.join(sessionDir, 'outbox', rid);
    const requestFile = `${base}.request`;
    const responseFile = `${base}.response`;
    writeRequest(requestFile, typeof request === 'string' ? request : JSON.stringify(request));
    let answer;
    try {
      answer = answerNow(responseFile);
    } catch (error) {
      forget(requestFile);
      throw error;
    }
    if (answer !== null) {
      forget(requestFile);
      return resolve(parse(rid, answer));
    }
    waitFor(rid, requestFile, responseFile, signal, resolve, reject);
  });
}

/** Reads a pending ask's answer in `sh` + `cat`, watching their pipe. */
function waitFor(rid, requestFile, responseFile, signal, resolve, reject) {
  let child;
  try {
    child = spawn('/bin/sh', ['-c', WAITER, 'permfs-wait', responseFile, requestFile], {
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
  } catch (error) {
    forget(requestFile);
    throw error;
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
    forget(requestFile);
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
    try {
      finish(null, parse(rid, Buffer.concat(out).toString(), Buffer.concat(err).toString().trim()));
    } catch (error) {
      finish(error);
    }
  });
}

module.exports = { ask };
