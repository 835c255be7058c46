// Builds the GraphiQL playground into ../dist, which the Go package embeds.
//
//   npm ci && npm run build
//
// Output: dist/index.html (a Go html/template; the handler fills in the
// config blob) and content-hashed assets under dist/assets/. Everything is
// self-contained: fonts are inlined as data: URLs, nothing is loaded from a
// CDN at runtime.
import * as esbuild from 'esbuild';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.resolve(here, '..', 'dist');
const assets = path.join(dist, 'assets');

// graphiql's stylesheet inlines Roboto and Fira Code as base64 woff2 for every
// unicode subset (~360 KB). Keep the Latin and Latin-Extended subsets only;
// other scripts fall back to the system sans-serif/monospace fonts.
const keepFontSubset = (rule) => {
  const m = /unicode-range:\s*([^;}]*)/.exec(rule);
  if (!m) return true;
  const first = m[1].trim().split(',')[0].trim().toUpperCase();
  return first === 'U+??' || first === 'U+0000-00FF' || first === 'U+100-24F' || first === 'U+0100-024F';
};

const trimFonts = {
  name: 'trim-font-subsets',
  setup(build) {
    build.onLoad({ filter: /graphiql[\\/]dist[\\/]style\.css$/ }, async (args) => {
      const css = await fs.readFile(args.path, 'utf8');
      const out = css.replace(/@font-face\s*\{[^}]*\}/g, (rule) => (keepFontSubset(rule) ? rule : ''));
      return { contents: out, loader: 'css' };
    });
  },
};

await fs.rm(dist, { recursive: true, force: true });
await fs.mkdir(assets, { recursive: true });

const result = await esbuild.build({
  entryPoints: { app: path.join(here, 'src', 'main.js') },
  bundle: true,
  minify: true,
  format: 'iife',
  platform: 'browser',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  define: { 'process.env.NODE_ENV': '"production"' },
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  outdir: assets,
  metafile: true,
  sourcemap: false,
  legalComments: 'eof',
  logLevel: 'info',
  plugins: [trimFonts],
});

const outputs = Object.keys(result.metafile.outputs).map((p) => path.basename(p));
const js = outputs.find((f) => f.endsWith('.js'));
const css = outputs.find((f) => f.endsWith('.css'));
if (!js || !css) throw new Error(`missing js or css output: ${outputs.join(', ')}`);

const html = (await fs.readFile(path.join(here, 'src', 'index.html'), 'utf8'))
  .replace('__JS__', js)
  .replace('__CSS__', css);
await fs.writeFile(path.join(dist, 'index.html'), html);

// Refuse to ship anything that would make the browser fetch from elsewhere.
for (const f of outputs) {
  const text = await fs.readFile(path.join(assets, f), 'utf8');
  if (f.endsWith('.css') && /@import|url\(\s*['"]?(https?:)?\/\//i.test(text)) {
    throw new Error(`${f} references an external URL`);
  }
}
console.log(`wrote ${path.relative(process.cwd(), dist)}: index.html, ${outputs.join(', ')}`);
