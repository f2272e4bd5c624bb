// report.html: one self-contained page. Charts are inline SVG built here (no JS library, no
// network); the only script is an error hook (so a browser check can see script errors), a
// filter box for the drill-down table and the load marker. Every string taken from the data
// passes through html_escape, and no data is placed inside <script>.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "nl2sql/report/run_report.h"
#include "nl2sql/run/run_data.h"

namespace nl2sql::report {
using nlohmann::json;

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

using std::string;

string esc(const string& s) { return html_escape(s); }
string num(double v, int d = 2) { return fmt::format("{:.{}f}", v, d); }

string cut(const string& s, size_t limit) {
  if (limit == 0 || s.size() <= limit) return s;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // keep UTF-8 whole
  return s.substr(0, n) + fmt::format(" … [{} more bytes]", s.size() - n);
}

// A chart label: at most `limit` bytes, cut on a UTF-8 boundary with an ellipsis.
string short_label(const string& s, size_t limit) {
  if (s.size() <= limit) return s;
  size_t n = limit;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "…";
}

struct Bar {
  string label;
  double value = 0, lo = 0, hi = 0;
  string note;
};

// Horizontal bars on a 0–100 scale with 95% CI whiskers.
string bar_chart(const string& id, const string& title, const std::vector<Bar>& bars) {
  if (bars.empty()) return "";
  const int w = 800, left = 230, right = 150, top = 28, row = 22;
  const int plot = w - left - right;
  const int h = top + row * static_cast<int>(bars.size()) + 10;
  string s = fmt::format("<div class=\"cap\">{}</div><svg class=\"chart\" id=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\"><title>{}</title>",
                         esc(title), esc(id), w, h, w, h, esc(title), esc(title));
  for (int t = 0; t <= 100; t += 25) {
    double x = left + plot * t / 100.0;
    s += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/><text class=\"axis\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                     x, top - 6, x, h - 8, x, top - 10, t);
  }
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    double y = top + row * static_cast<double>(i);
    double v = std::clamp(b.value, 0.0, 100.0);
    s += fmt::format("<text class=\"label\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, y + 14, esc(short_label(b.label, 34)));
    s += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"15\" data-label=\"{}\" data-value=\"{}\"><title>{}: {}%{}</title></rect>",
                     left, y + 3, plot * v / 100.0, esc(b.label), num(b.value), esc(b.label), num(b.value), esc(b.note));
    if (b.hi > b.lo)
      s += fmt::format("<line class=\"ci\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>", left + plot * b.lo / 100.0,
                       y + 10.5, left + plot * b.hi / 100.0, y + 10.5);
    s += fmt::format("<text class=\"value\" x=\"{}\" y=\"{:.1f}\">{}%{}</text>", left + plot + 6, y + 14, num(b.value, 1), esc(b.note));
  }
  return s + "</svg>";
}

struct Series {
  string name;
  std::vector<std::optional<double>> ys;
};

// Lines over numeric x (log scale when asked), y in [y0, y1].
string line_chart(const string& id, const string& title, const std::vector<double>& xs, const std::vector<Series>& series,
                  bool log_x, double y0, double y1, const string& x_label, const string& y_label) {
  if (xs.empty() || series.empty()) return "";
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  const int w = 760, h = 320, left = 60, right = 170, top = 20, bottom = 46;
  const int pw = w - left - right, ph = h - top - bottom;
  auto tx = [&](double x) { return log_x ? std::log(std::max(x, 1e-9)) : x; };
  double x0 = tx(*std::min_element(xs.begin(), xs.end())), x1 = tx(*std::max_element(xs.begin(), xs.end()));
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  auto px = [&](double x) { return left + pw * (tx(x) - x0) / (x1 - x0); };
  auto py = [&](double y) { return top + ph * (1 - (y - y0) / (y1 - y0)); };
  string s = fmt::format("<div class=\"cap\">{}</div><svg class=\"chart\" id=\"{}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"{}\"><title>{}</title>",
                         esc(title), esc(id), w, h, w, h, esc(title), esc(title));
  for (int t = 0; t <= 4; ++t) {
    double y = y0 + (y1 - y0) * t / 4.0;
    s += fmt::format("<line class=\"grid\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/><text class=\"axis\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>",
                     left, py(y), left + pw, py(y), left - 6, py(y) + 4, num(y, y1 - y0 < 5 ? 2 : 0));
  }
  std::set<double> ticks(xs.begin(), xs.end());
  size_t every = std::max<size_t>(1, ticks.size() / 12);
  size_t ti = 0;
  for (double x : ticks)
    if (ti++ % every == 0)
      s += fmt::format("<text class=\"axis\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", px(x), top + ph + 16, num(x, x == std::floor(x) ? 0 : 2));
  s += fmt::format("<text class=\"axis\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>", left + pw / 2, h - 6, esc(x_label));
  s += fmt::format("<text class=\"axis\" x=\"12\" y=\"{}\" transform=\"rotate(-90 12 {})\" text-anchor=\"middle\">{}</text>", top + ph / 2, top + ph / 2, esc(y_label));
  for (size_t si = 0; si < series.size(); ++si) {
    const char* color = kColors[si % 8];
    string pts, dots;
    for (size_t i = 0; i < xs.size() && i < series[si].ys.size(); ++i) {
      if (!series[si].ys[i]) continue;
      double y = *series[si].ys[i];
      pts += fmt::format("{:.1f},{:.1f} ", px(xs[i]), py(y));
      dots += fmt::format("<circle class=\"pt\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\" data-series=\"{}\" data-x=\"{}\" data-y=\"{}\"><title>{} at {}: {}</title></circle>",
                          px(xs[i]), py(y), color, esc(series[si].name), num(xs[i], 0), num(y, 4), esc(series[si].name), num(xs[i], 0), num(y, 2));
    }
    s += fmt::format("<polyline class=\"line\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>", color, pts) + dots;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text class=\"label\" x=\"{}\" y=\"{}\">{}</text>",
                     left + pw + 14, top + 18 * static_cast<int>(si), color, left + pw + 30, top + 18 * static_cast<int>(si) + 11, esc(short_label(series[si].name, 20)));
  }
  return s + "</svg>";
}

// UpSet-style: one bar per exact set of generators that found a correct candidate, with the
// membership matrix below.
string upset_chart(const json& overlap, const std::vector<string>& gens) {
  if (overlap.empty() || gens.empty()) return "";
  size_t cols = std::min<size_t>(overlap.size(), 24);
  const int left = 130, colw = 28, barh = 150, top = 20, rowh = 20;
  const int w = left + colw * static_cast<int>(cols) + 20;
  const int h = top + barh + 10 + rowh * static_cast<int>(gens.size()) + 10;
  size_t maxc = 1;
  for (size_t i = 0; i < cols; ++i) maxc = std::max(maxc, overlap[i]["questions"].get<size_t>());
  string s = fmt::format("<svg class=\"chart\" id=\"overlap\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"generator overlap\"><title>Which generators found a correct candidate</title>",
                         w, h, w, h);
  for (size_t g = 0; g < gens.size(); ++g)
    s += fmt::format("<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 8,
                     top + barh + 10 + rowh * static_cast<int>(g) + 14, esc(short_label(gens[g], 16)));
  for (size_t i = 0; i < cols; ++i) {
    const json& e = overlap[i];
    size_t c = e["questions"].get<size_t>();
    double bh = barh * static_cast<double>(c) / static_cast<double>(maxc);
    int x = left + colw * static_cast<int>(i);
    std::set<string> members;
    string label;
    for (const auto& g : e["generators"]) {
      members.insert(g.get<string>());
      label += (label.empty() ? "" : " + ") + g.get<string>();
    }
    if (label.empty()) label = "none";
    s += fmt::format("<rect class=\"bar\" x=\"{}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.1f}\" data-label=\"{}\" data-value=\"{}\"><title>{}: {} questions</title></rect>",
                     x + 4, top + barh - bh, colw - 8, bh, esc(label), c, esc(label), c);
    s += fmt::format("<text class=\"value\" x=\"{}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>", x + colw / 2, top + barh - bh - 3, c);
    double first = -1, last = -1;
    for (size_t g = 0; g < gens.size(); ++g) {
      double cy = top + barh + 10 + rowh * static_cast<double>(g) + 10;
      bool in = members.count(gens[g]) > 0;
      if (in) {
        if (first < 0) first = cy;
        last = cy;
      }
      s += fmt::format("<circle class=\"{}\" cx=\"{}\" cy=\"{:.1f}\" r=\"6\"/>", in ? "dot on" : "dot", x + colw / 2, cy);
    }
    if (last > first && first >= 0)
      s += fmt::format("<line class=\"member\" x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\"/>", x + colw / 2, first, x + colw / 2, last);
  }
  return s + "</svg>";
}

std::vector<Bar> group_bars(const json& groups) {
  std::vector<Bar> bars;
  for (const auto& [k, v] : groups.items())
    bars.push_back({k, v["ex"].get<double>(), v["ci95"][0].get<double>(), v["ci95"][1].get<double>(),
                    fmt::format(" (n={})", v["n"].get<size_t>())});
  return bars;
}

string yesno(const json& v) {
  int t = run::tri_bool(v);
  return t == 1 ? "<span class=\"ok\">✓</span>" : t == 0 ? "<span class=\"bad\">✗</span>" : "<span class=\"na\">–</span>";
}

string pre(const string& text, size_t limit) { return "<pre>" + esc(cut(text, limit)) + "</pre>"; }

// A separating-instance duel as evidence: the two candidates, the outcome, D′ as small tables,
// and the answers on D′ — each candidate's, the model's (majority and every ask) and gold's.
// D′'s rows, table by table (the instance's tables as written: database values of any type).
string instance_tables_view(const json& tables) {
  string d;
  for (const auto& [name, rows] : tables.items()) {
    if (!rows.is_array() || rows.empty()) continue;
    std::vector<string> cols;
    for (const auto& [c, v] : rows[0].items()) cols.push_back(c);
    d += "<p class=\"cap\">" + esc(name) + "</p><table class=\"small\"><tr>";
    for (const auto& c : cols) d += "<th>" + esc(c) + "</th>";
    d += "</tr>";
    for (const auto& row : rows) {
      d += "<tr>";
      for (const auto& c : cols) {
        const json& v = run::field(row, c.c_str());
        d += "<td>" + esc(cut(v.is_string() ? v.get<string>() : v.dump(), 80)) + "</td>";
      }
      d += "</tr>";
    }
    d += "</table>";
  }
  return d;
}

string duels_view(const std::vector<select::Duel>& duels, size_t limit) {
  if (duels.empty()) return "";
  string d = "<table class=\"small duels\"><tr><th>duel</th><th>outcome</th><th>D′ (separating instance)</th><th>answers on D′</th></tr>";
  for (const auto& du : duels) {
    const string& a = du.a;
    const string& b = du.b;
    const string outcome = du.outcome.value_or("");
    string out = outcome == "a" ? esc(a) + " wins" : outcome == "b" ? esc(b) + " wins" : "draw";
    if (du.why.value_or("") != "") out += " (" + esc(*du.why) + ")";
    d += fmt::format("<tr><td>{} vs {}</td><td>{}</td><td>", esc(a), esc(b), out);
    const select::InstanceRecord* inst = du.instance ? &*du.instance : nullptr;
    if (inst && inst->tables && inst->tables->is_object()) {
      d += instance_tables_view(*inst->tables);
    } else if (inst && inst->failure.value_or("") != "") {
      d += esc(*inst->failure);
    }
    d += "</td><td>";
    auto answer = [&](const string& label, const string& text, const string& cls) {
      if (text.empty()) return;
      d += "<p class=\"cap " + cls + "\">" + esc(label) + "</p>" + pre(text, limit);
    };
    if (inst) {
      answer(a, inst->answer_a.value_or(""), "");
      answer(b, inst->answer_b.value_or(""), "");
    }
    answer("model (majority)", du.majority.value_or(""), "");
    if (du.model_answers && !du.model_answers->empty()) {
      string all;
      for (const auto& x : *du.model_answers) {
        const json said = select::to_json(x);
        all += (all.empty() ? "" : "\n---\n") + (said.is_string() ? said.get<string>() : said.dump());
      }
      d += fmt::format("<details><summary>{} model answer(s)</summary>{}</details>", du.model_answers->size(),
                       pre(all, limit));
    }
    const bool disagrees = du.model_agrees_with_gold == false;
    answer(disagrees ? "gold — the model's answer disagrees: evidence against the gold SQL" : "gold",
           du.gold_answer.value_or(""), disagrees ? "bad" : "");
    d += "</td></tr>";
  }
  return d + "</table>";
}

string yesno(const std::optional<bool>& v) { return yesno(v ? json(*v) : json()); }

string question_details(const run::QuestionRecord& r, const json& rep, size_t limit) {
  const string metric = rep["primary_metric"].get<string>();
  bool correct = r.correct(metric);
  const string& qid = r.question_id;
  string d = fmt::format("<details class=\"q\" data-qid=\"{}\" data-correct=\"{}\"><summary>{} <b>{}</b> · {} · {} · {}</summary>",
                         esc(qid), correct ? 1 : 0, correct ? "<span class=\"ok\">✓</span>" : "<span class=\"bad\">✗</span>", esc(qid),
                         esc(r.db_id), esc(r.difficulty), esc(cut(r.question, 200)));
  d += "<div class=\"qbody\">";
  d += fmt::format("<p><b>Question.</b> {}</p><p><b>Evidence.</b> {}</p>", esc(r.question), esc(r.evidence));
  if (!r.ok) d += "<p class=\"bad\"><b>Failed:</b> " + esc(r.error) + "</p>";
  d += "<p><b>Gold SQL</b></p>" + pre(r.gold_sql, limit);
  const string selector = r.primary_selector.empty() ? rep["primary_selector"].get<string>() : r.primary_selector;
  d += "<p><b>Prediction</b> (" + esc(selector) + ")</p>" + pre(r.prediction, limit);
  if (r.verdict) {
    const run::Verdict& v = *r.verdict;
    d += "<p><b>Verdict:</b> " + esc(v.outcome) + " · prediction " + esc(v.pred_status);
    for (const auto& [k, b] : v.verdicts) d += " · " + esc(k) + " " + yesno(std::optional<bool>(b));
    if (v.gold_unusable) d += " · <span class=\"bad\">gold unusable</span>";
    if (v.gold_tie_dependent) d += " · gold tie-dependent";
    d += "</p>";
  }
  if (r.context) {
    const context::ContextRecord& ctx = *r.context;
    string kw;
    // Each keyword with where it came from: «text» (source).
    for (const auto& k : ctx.keywords)
      kw += (kw.empty() ? "" : ", ") + ("\u00ab" + k.text + "\u00bb") + (k.source.empty() ? "" : " (" + k.source + ")");
    d += "<p><b>Keywords:</b> " + esc(cut(kw, limit)) + "</p>";
    if (!ctx.values.empty()) {
      d += "<table class=\"small\"><tr><th>table</th><th>column</th><th>value</th><th>score</th></tr>";
      for (const auto& val : ctx.values)
        d += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(val.table), esc(val.column),
                         esc(cut(val.value, 200)), num(val.score, 3));
      d += "</table>";
    }
  }
  if (!r.candidates.empty()) {
    d += "<table class=\"cands\"><tr><th>candidate</th><th>generator</th><th>correct</th><th>cluster</th><th>exec before fix</th><th>exec after fix</th><th>SQL</th></tr>";
    for (const auto& c : r.candidates) {
      const auto& g = c.judged;
      d += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>", esc(c.id), esc(c.generator),
                       yesno(g ? g->correct : std::nullopt), g ? std::to_string(g->cluster) : string(),
                       yesno(g ? std::optional<bool>(g->executable_before_fix) : std::nullopt),
                       yesno(g ? std::optional<bool>(g->executable_after_fix) : std::nullopt));
      d += pre(c.sql, limit);
      if (!c.extraction_error.empty()) d += "<p class=\"bad\">extraction: " + esc(c.extraction_error) + "</p>";
      if (!c.execution.error.empty()) d += "<p class=\"bad\">" + esc(cut(c.execution.error, limit)) + "</p>";
      if (!c.execution.preview.empty()) d += "<details><summary>result preview</summary>" + pre(c.execution.preview, limit) + "</details>";
      if (!c.fix_rounds.empty()) {
        d += fmt::format("<details><summary>{} fixer round(s)</summary>", c.fix_rounds.size());
        for (const auto& fr : c.fix_rounds) {
          d += fmt::format("<p>round {} · {}</p>", fr.round, esc(fr.failure_class));
          d += "<p>feedback</p>" + pre(fr.feedback, limit) + "<p>before</p>" + pre(fr.sql_before, limit) +
               "<p>after</p>" + pre(fr.sql_after, limit);
        }
        d += "</details>";
      }
      if (!c.reasoning.empty()) d += "<details><summary>reasoning</summary>" + pre(c.reasoning, limit) + "</details>";
      d += "</td></tr>";
    }
    d += "</table>";
  }
  if (!r.selections.empty()) {
    d += "<table class=\"sels\"><tr><th>selector</th><th>chosen</th><th>correct</th><th>LLM calls</th><th>cost USD</th><th>explanation</th></tr>";
    string duels;  // separating-instance duels, drawn below the table at full width
    for (const auto& [name, s] : r.selections) {
      const json written = select::to_json(s.explanation);
      string expl = written.is_null() ? "" : written.dump(1, ' ', false, json::error_handler_t::replace);
      string view = duels_view(select::duels_of(s.explanation), limit);
      if (!view.empty())
        duels += "<p class=\"cap\">Duels of " + esc(name) + "</p><div class=\"wide\">" + view + "</div>";
      d += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{}</td></tr>", esc(name),
                       esc(s.candidate_id), yesno(s.correct), num(static_cast<double>(s.llm_calls), 0),
                       num(s.cost_usd, 4), view.empty() ? "" : "duels below · ",
                       expl.empty() ? "" : "<details><summary>explanation (JSON)</summary>" + pre(expl, limit) + "</details>");
    }
    d += "</table>" + duels;
  }
  return d + "</div></details>\n";
}

const char* kCss = R"css(
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1100px;color:#222;padding:0 12px}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.8em;border-bottom:1px solid #ddd}
.banner{background:#b00020;color:#fff;font-size:1.5em;font-weight:bold;padding:14px;text-align:center;margin:12px 0}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#f4f4f4}td.n{text-align:right}.headline{font-size:1.4em}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:6px;margin:2px 0;max-width:760px}
.ok{color:#137333;font-weight:bold}.bad{color:#b00020}.na{color:#888}
svg.chart{display:block;margin:8px 0;font-size:12px}svg .bar{fill:#4e79a7}svg .ci{stroke:#222;stroke-width:1.5}
svg .grid{stroke:#e5e5e5}svg .axis{fill:#666}svg .dot{fill:#ddd}svg .dot.on{fill:#222}svg .member{stroke:#222;stroke-width:2}
details.q{border-bottom:1px solid #eee;padding:3px 0}details.q>summary{cursor:pointer}.qbody{padding:6px 18px}
table.small td{font-size:.9em}.wide{overflow-x:auto}p.cap.bad{color:#b00020}table.duels pre{max-width:360px}.cap{font-weight:600;margin-top:14px;color:#444}#qfilter{width:320px;padding:4px}
)css";

const char* kHeadScript = R"js(
window.__nl2sqlErrors = 0;
window.onerror = function () {
  window.__nl2sqlErrors += 1;
  if (document.body) document.body.setAttribute('data-errors', String(window.__nl2sqlErrors));
};
)js";

const char* kBodyScript = R"js(
window.addEventListener('load', function () {
  var box = document.getElementById('qfilter');
  var shown = document.getElementById('qshown');
  var items = document.querySelectorAll('details.q');
  function apply() {
    var needle = box.value.toLowerCase(), wrongOnly = document.getElementById('qwrong').checked, n = 0;
    for (var i = 0; i < items.length; i++) {
      var hit = items[i].textContent.toLowerCase().indexOf(needle) >= 0 &&
                (!wrongOnly || items[i].getAttribute('data-correct') === '0');
      items[i].style.display = hit ? '' : 'none';
      if (hit) n++;
    }
    shown.textContent = String(n);
  }
  if (box) { box.addEventListener('input', apply); document.getElementById('qwrong').addEventListener('change', apply); apply(); }
  document.body.setAttribute('data-charts', String(document.querySelectorAll('svg.chart').length));
  document.body.setAttribute('data-errors', String(window.__nl2sqlErrors));
  document.body.setAttribute('data-ready', '1');
});
)js";

// The page's head, the run's identity, the value-ranking note and the headline EX.
void html_heading(string& h, const json& rep) {
  const json& man = rep["run"]["manifest"];
  string title = rep["run"]["title"].get<string>();
  h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">";
  h += "<title>" + esc("nl2sql report: " + title) + "</title><style>" + kCss + "</style><script>" + kHeadScript + "</script></head>\n";
  h += "<body data-errors=\"0\">\n";
  if (rep["simulated"].get<bool>())
    h += "<div class=\"banner\" id=\"simulated\">SIMULATED — not a model's accuracy</div>\n";
  h += "<h1>" + esc("nl2sql run report: " + title) + "</h1>\n";
  h += fmt::format("<p>Benchmark <b>{}</b> split <b>{}</b> · {} of {} questions recorded · primary metric <b>{}</b> · primary selector <b>{}</b><br>"
                   "dataset fingerprint <code>{}</code> · config hash <code>{}</code> · seed {} · tool {} · created {}</p>\n",
                   esc(run::string_field(man, "benchmark", "?")), esc(run::string_field(man, "split", "?")), rep["n_questions"].get<size_t>(),
                   rep["n_expected"].get<size_t>(), esc(rep["primary_metric"].get<string>()), esc(rep["primary_selector"].get<string>()),
                   esc(run::string_field(man, "dataset_fingerprint")), esc(run::string_field(man, "config_hash")), esc(run::string_field(man, "seed")),
                   esc(run::string_field(man, "tool_version")), esc(run::string_field(man, "created_at")));
  if (const json& c = run::field(rep, "context"); c.is_object()) {
    if (c["embedding_rerank"].get<bool>())
      h += fmt::format("<p id=\"value-ranking\">Value retrieval: LSH + edit distance, re-ranked by embedding similarity "
                       "(profile <code>{}</code>); re-ranking call failed on {} question(s)</p>\n",
                       esc(c["embeddings_profile"].get<string>()), c["rerank_fell_back_questions"].get<size_t>());
    else
      h += "<p id=\"value-ranking\">Value retrieval: LSH + edit distance only. <b>Embedding re-ranking was off</b> "
           "(no <code>context.embeddings.profile</code>; CHASE-SQL re-ranks retrieved values by embedding "
           "similarity)</p>\n";
  }
  const json& ov = rep["ex"]["overall"];
  h += fmt::format("<p class=\"headline\">EX <b id=\"ex\">{}%</b> (95% CI {}–{}), {} / {} correct; {} failed questions</p>\n",
                   num(ov["ex"].get<double>()), num(ov["ci95"][0].get<double>()), num(ov["ci95"][1].get<double>()),
                   ov["correct"].get<size_t>(), ov["n"].get<size_t>(), rep["errors"].size());
}

// EX by difficulty, database and SQL feature; every metric; the test suite.
void html_accuracy(string& h, const json& rep) {
  h += "<h2>Execution accuracy</h2>\n";
  h += bar_chart("ex-difficulty", "EX by difficulty", group_bars(rep["ex"]["by_difficulty"]));
  h += bar_chart("ex-db", "EX by database", group_bars(rep["ex"]["by_db"]));
  h += bar_chart("ex-feature", "EX by SQL feature of the gold query", group_bars(rep["ex"]["by_feature"]));
  if (!rep["metrics"].empty()) {
    h += "<table><tr><th>metric</th><th>EX %</th><th>95% CI</th><th>correct / n</th><th>EX % excluding unusable gold</th></tr>";
    for (const auto& [k, v] : rep["metrics"].items())
      h += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td>{}–{}</td><td class=\"n\">{} / {}</td><td class=\"n\">{}</td></tr>", esc(k),
                       num(v["ex"].get<double>()), num(v["ci95"][0].get<double>()), num(v["ci95"][1].get<double>()),
                       v["correct"].get<size_t>(), v["n"].get<size_t>(), num(v["ex_usable_gold"].get<double>()));
    h += "</table>";
    h += fmt::format("<p>Soft-F1 {} · outcomes:", num(rep["soft_f1"].get<double>() * 100));
    for (const auto& [k, v] : rep["outcomes"].items()) h += fmt::format(" {} {}", esc(k), v.get<size_t>());
    h += fmt::format(" · gold unusable {} · tie-dependent gold {}</p>\n", rep["gold_unusable"].size(), rep["tie_dependent"].size());
  }
  if (rep.contains("test_suite")) {
    const json& t = rep["test_suite"];
    h += fmt::format("<h3>Test suite</h3>\n<p>spider-ts compared gold and prediction on every database file of the "
                     "question's folder (up to {} files) for {} question(s): a prediction is correct only when it matches "
                     "on all of them. On the original databases alone, spider-ts EX would be {}%. {} question(s) pass on "
                     "the original but fail on a variant.</p>\n",
                     t["most_database_files"].get<size_t>(), t["questions_on_a_suite"].get<size_t>(),
                     num(t["ex_original_only"].get<double>()), t["passes_original_fails_variant"].size());
    if (!t["passes_original_fails_variant"].empty()) {
      h += "<table><tr><th>question</th><th>db</th><th>variant</th><th>gold vs prediction there</th></tr>";
      for (const auto& q : t["passes_original_fails_variant"])
        h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(q["question_id"].get<string>()),
                         esc(q["db_id"].get<string>()), esc(q["variant"].get<string>()), esc(q["why"].get<string>()));
      h += "</table>\n";
    }
  }
}

// The selectors against the bounds, the duels, the generators, the curves and the primary selector's errors.
void html_selectors(string& h, const json& rep) {
  h += "<h2>Selectors</h2>\n";
  std::vector<Bar> sel_bars;
  for (const auto& [k, v] : rep["selectors"].items())
    sel_bars.push_back({k + (v["primary"].get<bool>() ? " (primary)" : ""), v["ex"].get<double>(), v["ci95"][0].get<double>(),
                        v["ci95"][1].get<double>(), fmt::format(" ({} calls)", num(v["llm_calls"].get<double>(), 0))});
  for (const char* b : {"oracle", "adversarial"}) {
    const json& v = rep["bounds"][b];
    sel_bars.push_back({string(b) + (string(b) == "oracle" ? " (upper bound)" : " (lower bound)"), v["ex"].get<double>(),
                        v["ci95"][0].get<double>(), v["ci95"][1].get<double>(), ""});
  }
  h += bar_chart("selectors", "EX per selector with the oracle and adversarial bounds", sel_bars);
  if (run::field(rep, "gold_disputes").is_array() && !rep["gold_disputes"].empty()) {
    string ids;
    for (const auto& g : rep["gold_disputes"]) ids += (ids.empty() ? "" : ", ") + esc(run::string_field(g, "question_id"));
    h += fmt::format("<p class=\"bad\">Separating-instance duels where the model's answer on D′ disagrees with gold's "
                     "(evidence against the gold SQL; see each question's duels): {} question(s): {}</p>",
                     rep["gold_disputes"].size(), ids);
  }
  if (run::field(rep, "separating_duels").is_object())
    for (const auto& [name, v] : rep["separating_duels"].items()) {
      string draws;
      for (const auto& [kind, n] : v["draws"].items()) draws += fmt::format("{}{} {}", draws.empty() ? "" : ", ", esc(kind), n.get<int>());
      h += fmt::format("<p>{}: technical coverage {}/{} questions ({:.1f}%: duels put to the model / two or more distinct "
                       "results); draws by reason: {} (each question's duels say why).</p>",
                       esc(name), v["questions_dueled"].get<int>(), v["questions_contested"].get<int>(),
                       100.0 * v["technical_coverage"].get<double>(), draws.empty() ? "none" : draws);
    }

  if (!rep["generators"].empty()) {
    h += "<h2>Generators</h2>\n<table><tr><th>generator</th><th>candidates</th><th>executable before fix</th><th>after fix</th><th>fixer rounds</th>"
         "<th>correct candidates</th><th>questions with a correct one</th><th>unique correct</th><th>upper bound %</th></tr>";
    std::vector<string> gens;
    for (const auto& [k, v] : rep["generators"].items()) {
      gens.push_back(k);
      h += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}%</td><td class=\"n\">{}%</td><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                       "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                       esc(k), v["candidates"].get<size_t>(), num(v["executable_before_fix_pct"].get<double>(), 1),
                       num(v["executable_after_fix_pct"].get<double>(), 1), v["fix_rounds"].get<size_t>(), v["correct_candidates"].get<size_t>(),
                       v["questions_with_correct"].get<size_t>(), v["unique_correct"].get<size_t>(), num(v["upper_bound_pct"].get<double>(), 1));
    }
    h += "</table>\n<p>Which generators found a correct candidate (questions per exact set of generators):</p>\n";
    h += upset_chart(rep["overlap"], gens);
  }

  if (!rep["curves"].empty()) {
    h += "<h2>Accuracy vs number of candidates</h2>\n";
    std::vector<double> xs;
    std::vector<Series> series = {{"upper bound", {}}, {"lower bound", {}}, {"self-consistency", {}}, {"selector", {}}};
    static const char* kKeys[] = {"upper", "lower", "self_consistency", "selector"};
    for (const auto& p : rep["curves"]) {
      xs.push_back(p["k"].get<double>());
      for (int i = 0; i < 4; ++i)
        series[i].ys.push_back(p[kKeys[i]].is_number() ? std::optional<double>(p[kKeys[i]].get<double>()) : std::nullopt);
    }
    h += line_chart("curves", "Upper bound, lower bound, self-consistency and selector vs number of candidates", xs, series,
                    /*log_x=*/true, 0, 100, "candidates (log scale)", "% of questions");
  }

  if (rep.contains("selector_curves") && !rep["selector_curves"]["points"].empty()) {
    const json& sc = rep["selector_curves"];
    h += string("<h2>Accuracy vs number of candidates per selector") + (rep["simulated"].get<bool>() ? " (SIMULATED)" : "") +
         "</h2>\n<p>Each selector re-run on the first k candidates, mean EX over its repeats; contested: the questions the "
         "separating-instance paper keeps (the k candidates disagree and one is correct).</p>\n";
    for (const char* part : {"on_contested", "all"}) {
      std::vector<double> xs;
      std::vector<Series> series;
      for (const auto& name : sc["selectors"]) series.push_back({name.get<string>(), {}});
      for (const auto& p : sc["points"]) {
        xs.push_back(p["k"].get<double>());
        for (auto& se : series) {
          const json& e = p[part].value(se.name, json::object());
          se.ys.push_back(e.contains("mean_pct") && e["mean_pct"].is_number() ? std::optional<double>(e["mean_pct"].get<double>())
                                                                                : std::nullopt);
        }
      }
      const bool all = string(part) == "all";
      h += line_chart(all ? "selector-curves-all" : "selector-curves-contested",
                      all ? "Accuracy vs number of candidates, all questions"
                          : "Accuracy vs number of candidates, contested questions (the paper's Figure 3)",
                      xs, series, /*log_x=*/true, 0, 100, "candidates (log scale)", "EX %, mean over repeats");
    }
  }

  h += "<h2>Selection errors (primary selector)</h2>\n";
  std::vector<Bar> err_bars;
  static const std::pair<const char*, const char*> kCats[] = {{"correct", "correct"},
                                                              {"wrong_selection", "correct candidate present, not chosen"},
                                                              {"no_correct_candidate", "no correct candidate"},
                                                              {"gold_unusable", "gold unusable"},
                                                              {"failed", "question failed"}};
  for (auto [k, label] : kCats) {
    const json& v = rep["selection_errors"][k];
    err_bars.push_back({label, v["pct"].get<double>(), 0, 0, fmt::format(" ({})", v["count"].get<size_t>())});
  }
  h += bar_chart("selection-errors", "Selection error analysis", err_bars);
}

// Tokens, cost and latency per stage, the model faults and the latency percentiles.
void html_usage(string& h, const json& rep) {
  h += "<h2>Tokens, cost and latency</h2>\n<table><tr><th>stage</th><th>calls</th><th>prompt tokens</th>"
       "<th>of which cached by the provider</th><th>completion tokens</th><th>of which reasoning</th>"
       "<th>cost USD</th><th>duplicate requests</th></tr>";
  auto usage_row = [&](const std::string& cell, const std::string& label, const json& v) {
    return fmt::format("<tr><{0}>{1}</{0}><{0} class=\"n\">{2}</{0}><{0} class=\"n\">{3}</{0}><{0} class=\"n\">{4}</{0}>"
                       "<{0} class=\"n\">{5}</{0}><{0} class=\"n\">{6}</{0}><{0} class=\"n\">{7}</{0}><{0} class=\"n\">{8}</{0}></tr>",
                       cell, label, num(v["calls"].get<double>(), 0), num(v["prompt_tokens"].get<double>(), 0),
                       esc(cached_tokens_cell(v)), num(v["completion_tokens"].get<double>(), 0),
                       esc(reasoning_tokens_cell(v)), num(v["cost_usd"].get<double>(), 4),
                       v.value("duplicate_requests", int64_t{0}));
  };
  for (const auto& [k, v] : rep["usage"]["stages"].items()) h += usage_row("td", esc(k), v);
  const json& t = rep["usage"]["total"];
  h += usage_row("th", "total", t) + "</table>";
  if (t.contains("prefix_share") && t["prefix_share"].is_number())
    h += fmt::format("<p>Prefix share: {}% of the prompt characters sent repeat the longest prefix of an earlier "
                     "request of the run — the most a provider's prefix cache could serve.</p>",
                     num(100 * t["prefix_share"].get<double>(), 1));
  if (t.value("duplicate_requests", int64_t{0}) > 0)
    h += fmt::format("<p><strong>Warning:</strong> {} request(s) repeated a request body this run had already sent, "
                     "byte for byte (duplicate requests; the target is 0).</p>",
                     t.value("duplicate_requests", int64_t{0}));
  if (t.value("degraded_prompts", 0.0) > 0) {
    std::string parts;
    for (const auto& [k, v] : rep["usage"]["stages"].items())
      if (v.value("degraded_prompts", 0.0) > 0)
        parts += (parts.empty() ? "" : ", ") + esc(k) + " " + num(v["degraded_prompts"].get<double>(), 0);
    h += "<p>Prompts whose schema was lightened to fit the model's context: " + parts + ".</p>";
  }
  if (rep.contains("llm_faults")) {
    const json& f = rep["llm_faults"];
    std::string kinds;
    for (const auto& [k, v] : f["failed_by_kind"].items())
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", esc(k), v.get<int64_t>());
    h += fmt::format("<p>Model calls failed after retries: {}; retries: {}; questions affected: {}{}.</p>\n",
                     f["failed_calls"].get<int64_t>(), f["retries"].get<int64_t>(),
                     f["questions_affected"].get<int64_t>(), kinds.empty() ? "" : " (" + kinds + ")");
    if (rep.contains("endpoint_load"))
      for (const auto& [profile, l] : rep["endpoint_load"].items())
        h += fmt::format("<p>Endpoint overload: profile {} answered \"busy\" {} times; requests in flight were "
                         "lowered to {} of {} and raised again as it answered.</p>\n",
                         esc(profile), l.value("overloads", int64_t{0}), l.value("lowest_in_flight", int64_t{0}),
                         l.value("max_in_flight", int64_t{0}));
    if (f.value("parse_failures", int64_t{0}) > 0) {
      std::string stages;
      const json by_stage = f.value("parse_failures_by_stage", json::object());
      for (const auto& [k, v] : by_stage.items())
        stages += fmt::format("{}{} {}", stages.empty() ? "" : ", ", esc(k), v.get<int64_t>());
      h += fmt::format("<p>Answers that could not be read (parse failures): {} in {} question(s) ({}).</p>\n",
                       f["parse_failures"].get<int64_t>(), f.value("questions_with_parse_failures", int64_t{0}),
                       stages);
    }
  }
  h += "<table><tr><th>stage</th><th>latency p50 s</th><th>p90 s</th><th>p95 s</th><th>max s</th></tr>";
  for (const auto& [k, v] : rep["latency_s"].items())
    h += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>", esc(k),
                     num(v["p50"].get<double>(), 3), num(v["p90"].get<double>(), 3), num(v["p95"].get<double>(), 3), num(v["max"].get<double>(), 3));
  h += "</table>\n";
}

}  // namespace

string render_html(const json& rep, const run::RunData& run, const ReportOptions& o) {
  string h;
  html_heading(h, rep);
  html_accuracy(h, rep);
  html_selectors(h, rep);
  html_usage(h, rep);

  if (rep.contains("weights")) {
    h += "<h2>WMA expert weights</h2>\n";
    std::set<double> xset;
    double lo = 1e300, hi = -1e300;
    for (const auto& [k, pts] : rep["weights"].items())
      for (const auto& p : pts) {
        xset.insert(p[0].get<double>());
        lo = std::min(lo, p[1].get<double>());
        hi = std::max(hi, p[1].get<double>());
      }
    std::vector<double> xs(xset.begin(), xset.end());
    std::vector<Series> series;
    for (const auto& [k, pts] : rep["weights"].items()) {
      Series s{k, std::vector<std::optional<double>>(xs.size())};
      for (const auto& p : pts)
        s.ys[std::lower_bound(xs.begin(), xs.end(), p[0].get<double>()) - xs.begin()] = p[1].get<double>();
      series.push_back(std::move(s));
    }
    if (hi - lo < 1e-9) hi = lo + 1;
    h += line_chart("weights", "WMA weights after each question", xs, series, false, std::min(0.0, lo), hi, "question index", "weight");
  }

  if (!rep["errors"].empty()) {
    h += "<h2>Failed questions</h2>\n<table><tr><th>question</th><th>error</th></tr>";
    for (const auto& e : rep["errors"])
      h += "<tr><td>" + esc(e["question_id"].get<string>()) + "</td><td>" + esc(cut(e["error"].get<string>(), o.preview_chars)) + "</td></tr>";
    h += "</table>\n";
  }

  size_t shown = o.drilldown_limit ? std::min(o.drilldown_limit, run.records.size()) : run.records.size();
  h += fmt::format("<h2>Questions</h2>\n<p><input id=\"qfilter\" type=\"search\" placeholder=\"filter: id, database, text, SQL\"> "
                   "<label><input id=\"qwrong\" type=\"checkbox\"> wrong only</label> · <span id=\"qshown\">{}</span> of {} shown{}</p>\n<div id=\"questions\">\n",
                   shown, shown, shown < run.records.size() ? fmt::format(" (drill-down limited to {} of {})", shown, run.records.size()) : "");
  for (size_t i = 0; i < shown; ++i) h += question_details(run.records[i], rep, o.preview_chars);
  h += "</div>\n<script>" + string(kBodyScript) + "</script>\n</body></html>\n";
  return h;
}

}  // namespace nl2sql::report
