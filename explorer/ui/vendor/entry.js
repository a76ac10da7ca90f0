'use strict';
// The trace types the pages draw (scatter comes with the core); explorer/ui/plotly_bundle.py's
// SMALL_TRACES names the same four.
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/table')]);
module.exports = Plotly;
