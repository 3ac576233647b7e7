// Argument checks the package's entry points share: each names what is wrong.

/** A caller's value for an error message; never throws (an object's own toString may). */
export function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null || ['undefined', 'number', 'boolean', 'bigint'].includes(typeof value)) return String(value);
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

export function requireText(what, value) {
  if (typeof value !== 'string') throw new TypeError(`sesame-lm: ${what} must be a string, got ${value === null ? 'null' : typeof value}`);
  if (!value.trim()) throw new Error(`sesame-lm: ${what} is empty`);
  return value;
}

export function requireCount(what, value, min = 0) {
  // The wasm side takes u32s; larger numbers would wrap.
  if (!Number.isInteger(value) || value < min || value > 0xffffffff) throw new TypeError(`sesame-lm: ${what} must be an integer from ${min} to 2³²−1, got ${describe(value)}`);
  return value;
}
