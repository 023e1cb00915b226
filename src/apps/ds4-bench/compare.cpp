#include "apps/ds4-bench/compare.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ds4::bench {
namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, ',')) {
    while (!cell.empty() && (cell.back() == '\r' || cell.back() == ' ')) cell.pop_back();
    while (!cell.empty() && cell.front() == ' ') cell.erase(0, 1);
    out.push_back(cell);
  }
  return out;
}

double number(const std::string& s, const std::string& where) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  throw InputError(where + ": '" + s + "' is not a number");
}

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

std::map<int64_t, PeerRow> parse_peer_csv(const std::string& text, const std::string& source) {
  std::stringstream ss(text);
  std::string line;
  std::vector<std::string> head;
  std::map<int64_t, PeerRow> rows;
  int lineno = 0;
  int ic = -1, ip = -1, ig = -1;
  while (std::getline(ss, line)) {
    ++lineno;
    if (line.empty() || line[0] == '#' || line == "\r") continue;
    auto cells = split(line);
    if (head.empty()) {
      head = cells;
      for (size_t i = 0; i < head.size(); ++i) {
        if (head[i] == "ctx_tokens") ic = int(i);
        if (head[i] == "prefill_tps") ip = int(i);
        if (head[i] == "gen_tps") ig = int(i);
      }
      for (auto [idx, name] : {std::pair{ic, "ctx_tokens"}, {ip, "prefill_tps"}, {ig, "gen_tps"}})
        if (idx < 0) throw InputError(source + ": CSV header has no column '" + name + "' (header: " + line + ")");
      continue;
    }
    const std::string where = source + " line " + std::to_string(lineno);
    if (cells.size() < head.size()) throw InputError(where + ": " + std::to_string(cells.size()) +
                                                     " cells, header has " + std::to_string(head.size()));
    rows[int64_t(number(cells[size_t(ic)], where))] = {number(cells[size_t(ip)], where),
                                                      number(cells[size_t(ig)], where)};
  }
  if (rows.empty()) throw InputError(source + ": no CSV rows");
  return rows;
}

std::string run_peer(const std::string& cmd, const std::map<std::string, std::string>& vars) {
  std::string c = cmd;
  std::string csv_path;
  if (c.find("{csv}") != std::string::npos)
    csv_path = (std::filesystem::temp_directory_path() / ("ds4-bench-peer-" + std::to_string(getpid()) + ".csv")).string();
  auto all = vars;
  all["csv"] = csv_path;
  for (const auto& [k, v] : all)
    for (size_t at; (at = c.find("{" + k + "}")) != std::string::npos;) c.replace(at, k.size() + 2, v);
  std::fprintf(stderr, "ds4-bench: peer: %s\n", c.c_str());
  FILE* p = popen(c.c_str(), "r");
  if (!p) throw Error("--compare: cannot start: " + c);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) throw Error("--compare: peer command failed (status " + std::to_string(rc) + "): " + c);
  if (csv_path.empty()) return out;
  std::ifstream f(csv_path);
  if (!f) throw Error("--compare: the peer wrote no CSV to " + csv_path);
  std::stringstream s;
  s << f.rdbuf();
  std::filesystem::remove(csv_path);
  return s.str();
}

std::string ratio_csv(const std::vector<Row>& ours, const std::map<int64_t, PeerRow>& peer) {
  std::string out = "ctx_tokens,prefill_tps,peer_prefill_tps,prefill_ratio,gen_tps,peer_gen_tps,gen_ratio\n";
  for (const auto& r : ours) {
    out += std::to_string(r.ctx_tokens) + "," + fmt(r.prefill_tps) + ",";
    auto it = peer.find(r.ctx_tokens);
    if (it == peer.end()) {
      out += ",," + fmt(r.gen_tps) + ",,\n";
      continue;
    }
    const PeerRow& p = it->second;
    out += fmt(p.prefill_tps) + "," + (p.prefill_tps > 0 ? fmt(r.prefill_tps / p.prefill_tps) : "") + ",";
    out += fmt(r.gen_tps) + "," + fmt(p.gen_tps) + "," + (p.gen_tps > 0 && r.gen_tokens ? fmt(r.gen_tps / p.gen_tps) : "");
    out += "\n";
  }
  return out;
}

}  // namespace ds4::bench
