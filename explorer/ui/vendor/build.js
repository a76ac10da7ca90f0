// Rebuilds plotly-small.min.js: plotly.js with only the trace types the explorer's pages draw.
// plotly.js evaluates in about a quarter of the full bundle's time (the most of a page's open).
//
//   cd explorer/ui/vendor && npm install --no-save plotly.js@4.1.1 esbuild@0.28.2 \
//       esbuild-plugin-inline-css@0.0.1 esbuild-plugin-environment@0.5.0 && node build.js
//
// Keep the plotly.js version equal to the one the installed plotly (Python) ships:
// tests/lessons/test_lesson_plotly.py fails when they differ, and the build falls back to the
// full bundle then. The settings follow plotly.js's own esbuild-config.js.
const esbuild = require('esbuild');
const InlineCSSPlugin = require('esbuild-plugin-inline-css');
const { environmentPlugin } = require('esbuild-plugin-environment');
const version = require('plotly.js/package.json').version;

esbuild.build({
  entryPoints: ['entry.js'],
  outfile: 'plotly-small.min.js',
  format: 'iife',
  globalName: 'Plotly',
  bundle: true,
  minify: true,
  plugins: [InlineCSSPlugin(), environmentPlugin({ NODE_DEBUG: false })],
  alias: { stream: 'stream-browserify' },
  define: { global: 'window', 'define.amd': 'false' },
  target: 'es2016',
  legalComments: 'none',
  banner: {
    js: `/**\n* plotly.js (lessons: bar, heatmap, scatter, table) v${version}\n` +
      '* Copyright 2012-2025, Plotly, Inc.\n* All rights reserved.\n* Licensed under the MIT license\n*/',
  },
  logLevel: 'info',
}).catch(() => process.exit(1));
