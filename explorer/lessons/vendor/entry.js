'use strict';
// The trace types lessons draw (scatter comes with the core); explorer/lessons/page.py's
// LESSON_TRACES names the same four.
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/bar'), require('plotly.js/lib/heatmap'), require('plotly.js/lib/table')]);
module.exports = Plotly;
