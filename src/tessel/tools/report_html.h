// The page of `tessel report`: one self-contained HTML file (its CSS and
// script inline, no request to any server: a Content-Security-Policy of
// default-src 'none' says so to the browser) that renders the report's data,
// embedded as one JSON blob, into the kernel table, the roofline plot, the
// fused groups and the compile log (docs/report.md).
//
// Names from the model reach the page only as JSON text inside the data
// element, with '<', '>' and '&' written as \u escapes (so no name can close
// the element), and the script puts them into the document as text nodes and
// attribute values, never as markup; the title is HTML-escaped.
#pragma once

#include <string>
#include <string_view>

#include "tessel/driver/json_util.h"

namespace tessel::cli {

// & < > " ' as character references.
std::string html_escape(std::string_view s);

// `j` as JSON text that can stand inside a <script> element: '<', '>' and
// '&' (which JSON has only inside strings) as \u003c, \u003e, \u0026.
std::string json_for_script(const Json& j);

// The page for the report's data (cmd_report.cpp builds it); its title
// names data["model"].
std::string report_html(const Json& data);

}  // namespace tessel::cli
