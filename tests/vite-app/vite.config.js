// The package ships its wasm and worker beside its JS and finds them by import.meta.url:
// keep it out of dependency pre-bundling (the README says so too).
export default {
  optimizeDeps: { exclude: ['sesame-lm'] },
  build: { target: 'es2022' },
};
