// Proof-of-work for a sale's waiting room (the Go side is package pow): find the smallest
// counter 0, 1, 2, … whose decimal spelling makes SHA-256(challenge + ':' + counter) start
// with at least `bits` zero bits. It takes 2^bits hashes on average (16 bits: 65 536).
//
// solve() runs the search in a Web Worker (this same file, loaded as a module worker) so the
// page stays responsive; where a worker cannot start, it searches on the page in batches of
// digests, yielding to the event loop between batches. Both search in the same order as Go's
// pow.Solve, so all three find the same counter. The file imports nothing: a worker does not
// see the page's import map.
//
// crypto.subtle exists only in secure contexts (https, or http on localhost).

export const MIN_BITS = 1;
export const MAX_BITS = 28; // pow.MaxBits
export const MAX_CHALLENGE_LEN = 251; // pow.MaxChallengeLen
const BATCH = 512; // digests started at once
const YIELD_MS = 30; // on the page: give the event loop a turn at least this often

// leadingZeroBits counts the zero bits at the start of bytes, most significant first.
export function leadingZeroBits(bytes) {
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== 0) return i * 8 + Math.clz32(bytes[i]) - 24;
  }
  return bytes.length * 8;
}

function check(challenge, bits) {
  if (typeof challenge !== 'string' || challenge.length === 0 || challenge.length > MAX_CHALLENGE_LEN ||
      !/^[A-Za-z0-9_-]+$/.test(challenge)) {
    throw new TypeError('pow: not a challenge');
  }
  if (!Number.isInteger(bits) || bits < MIN_BITS || bits > MAX_BITS) {
    throw new RangeError(`pow: difficulty ${bits} outside ${MIN_BITS}..${MAX_BITS}`);
  }
  if (!globalThis.crypto?.subtle) throw new Error('pow: crypto.subtle is unavailable (not a secure context)');
}

function aborted(signal) {
  return signal.reason ?? new DOMException('proof-of-work aborted', 'AbortError');
}

// solveHere searches on the calling thread. onProgress(hashes) is called after each batch.
export async function solveHere(challenge, bits, { signal, onProgress } = {}) {
  check(challenge, bits);
  const prefix = new TextEncoder().encode(challenge + ':');
  let yielded = Date.now();
  for (let n = 0; n < Number.MAX_SAFE_INTEGER; n += BATCH) {
    if (signal?.aborted) throw aborted(signal);
    const digests = [];
    for (let i = 0; i < BATCH; i++) {
      const digits = String(n + i); // ASCII: one byte a digit
      const input = new Uint8Array(prefix.length + digits.length);
      input.set(prefix);
      for (let j = 0; j < digits.length; j++) input[prefix.length + j] = digits.charCodeAt(j);
      digests.push(crypto.subtle.digest('SHA-256', input));
    }
    const sums = await Promise.all(digests);
    for (let i = 0; i < BATCH; i++) { // in counter order: the smallest solution wins
      if (leadingZeroBits(new Uint8Array(sums[i])) >= bits) return String(n + i);
    }
    onProgress?.(n + BATCH);
    if (Date.now() - yielded >= YIELD_MS) {
      await new Promise((resolve) => setTimeout(resolve, 0));
      yielded = Date.now();
    }
  }
  throw new Error('pow: no solution');
}

// solve resolves to the solution of challenge at bits. Options: signal (an AbortSignal),
// onProgress(hashes), worker (false to search on the page).
export function solve(challenge, bits, { signal, onProgress, worker = true } = {}) {
  try {
    check(challenge, bits);
  } catch (err) {
    return Promise.reject(err);
  }
  if (!worker || typeof Worker !== 'function') return solveHere(challenge, bits, { signal, onProgress });
  let w;
  try {
    w = new Worker(import.meta.url, { type: 'module' });
  } catch {
    return solveHere(challenge, bits, { signal, onProgress });
  }
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (fn, v) => {
      if (done) return;
      done = true;
      w.terminate();
      signal?.removeEventListener('abort', onAbort);
      fn(v);
    };
    const onAbort = () => finish(reject, aborted(signal));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    w.onmessage = ({ data }) => {
      if (data.progress !== undefined) onProgress?.(data.progress);
      else if (data.solution !== undefined) finish(resolve, data.solution);
      else finish(reject, new Error(data.error));
    };
    // A worker that cannot load (no module workers, a policy): search on the page instead.
    w.onerror = (e) => {
      e.preventDefault?.();
      if (done) return;
      done = true;
      w.terminate();
      signal?.removeEventListener('abort', onAbort);
      solveHere(challenge, bits, { signal, onProgress }).then(resolve, reject);
    };
    w.postMessage({ challenge, bits });
  });
}

// In a worker: one message {challenge, bits}, answered with {progress}… then {solution} or
// {error}.
if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) {
  globalThis.onmessage = async ({ data }) => {
    try {
      const solution = await solveHere(data.challenge, data.bits, {
        onProgress: (progress) => globalThis.postMessage({ progress }),
      });
      globalThis.postMessage({ solution });
    } catch (err) {
      globalThis.postMessage({ error: String(err?.message ?? err) });
    }
  };
}
