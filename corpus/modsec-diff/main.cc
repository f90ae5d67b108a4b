// modsec-diff: libmodsecurity 3's side of corpus/diff_fuzz.py.
//
// Loads one SecLang file, runs phases 1 and 2 of each request of a JSONL
// corpus (docs/formats.md, "Requests"), and writes one decision per line in
// the fields `waf eval` writes that the fuzzer compares: id, interrupted,
// status, matched_ids (rules that logged, and the interrupting one) and
// logdata (each logged match's expanded `logdata`, ModSecurity's
// `[data "..."]`), so that matched variable values are compared too
// (rules log `%{MATCHED_VAR_NAME}` and `%{MATCHED_VAR}`).
//
// ../shared/peers's modsec-peer reports rule ids only; this one exists for
// the values.
//
// Build (corpus/modsec-diff/build.sh):
//   g++ -O2 -std=c++17 -o modsec-diff main.cc $(pkg-config --cflags --libs modsecurity)
// Usage: modsec-diff --config FILE --in requests.jsonl --out decisions.jsonl
// Exit codes: 0 done, 2 usage, 3 the rules do not load (message on stderr).

// The v3 headers use NULL and free without including their headers.
#include <cstddef>
#include <cstdlib>

#include <modsecurity/intervention.h>
#include <modsecurity/modsecurity.h>
#include <modsecurity/rule_message.h>
#include <modsecurity/rules_set.h>
#include <modsecurity/transaction.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

using nlohmann::json;
// The C API (msc_*) is declared inside the namespace when compiled as C++.
using namespace modsecurity;

namespace {

struct Match {
  int id;
  std::string data;
};

// What the log callback collects during one transaction.
struct Collected {
  std::vector<Match> logged;
};

void onLog(void *data, const void *message) {
  if (data == nullptr || message == nullptr) return;
  auto *m = static_cast<const modsecurity::RuleMessage *>(message);
  static_cast<Collected *>(data)->logged.push_back({static_cast<int>(m->m_ruleId), m->m_data});
}

std::string base64Decode(const std::string &in) {
  std::string out;
  unsigned acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else break;
    acc = (acc << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

// The value of `[key "..."]` in an intervention's log line (the disruptive
// rule's message goes there, not to the log callback).
std::string logField(const std::string &log, const std::string &key) {
  std::string open = "[" + key + " \"";
  size_t at = log.find(open);
  if (at == std::string::npos) return "";
  at += open.size();
  size_t end = log.find("\"]", at);
  return log.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

struct Decision {
  bool interrupted = false;
  int status = 200;
  int ruleId = 0;
  std::string interventionLog;
};

bool intervened(modsecurity::Transaction *t, Decision *d) {
  ModSecurityIntervention it;
  it.status = 200;
  it.pause = 0;
  it.url = nullptr;
  it.log = nullptr;
  it.disruptive = 0;
  bool hit = msc_intervention(t, &it) > 0 || it.disruptive;
  if (hit) {
    d->interrupted = true;
    d->status = it.status;
    if (it.log != nullptr) {
      d->interventionLog = it.log;
      d->ruleId = std::atoi(logField(d->interventionLog, "id").c_str());
    }
  }
  std::free(it.log);
  std::free(it.url);
  return hit;
}

json decide(modsecurity::ModSecurity *ms, modsecurity::RulesSet *rules, const json &req) {
  Collected got;
  Decision d;
  std::string method = req.value("method", "GET");
  std::string uri = req.value("uri", "/");
  std::string version = req.value("version", "HTTP/1.1");
  // libmodsecurity takes "1.1" and makes REQUEST_PROTOCOL "HTTP/1.1".
  if (version.rfind("HTTP/", 0) == 0) version = version.substr(5);
  std::string body;
  if (req.contains("body_b64")) body = base64Decode(req["body_b64"].get<std::string>());
  else if (req.contains("body")) body = req["body"].get<std::string>();

  modsecurity::Transaction *t = msc_new_transaction(ms, rules, &got);
  do {
    msc_process_connection(t, "10.0.0.1", 40000, "127.0.0.1", 80);
    if (intervened(t, &d)) break;
    msc_process_uri(t, uri.c_str(), method.c_str(), version.c_str());
    if (intervened(t, &d)) break;
    if (req.contains("headers")) {
      for (const auto &h : req["headers"]) {
        std::string k = h.at(0).get<std::string>(), v = h.at(1).get<std::string>();
        msc_add_n_request_header(t, reinterpret_cast<const unsigned char *>(k.data()), k.size(),
                                 reinterpret_cast<const unsigned char *>(v.data()), v.size());
      }
    }
    msc_process_request_headers(t);
    if (intervened(t, &d)) break;
    if (!body.empty()) {
      msc_append_request_body(t, reinterpret_cast<const unsigned char *>(body.data()), body.size());
      if (intervened(t, &d)) break;
    }
    msc_process_request_body(t);
    intervened(t, &d);
  } while (false);
  msc_transaction_cleanup(t);

  json ids = json::array();
  json logdata = json::array();
  auto addId = [&ids](int id) {
    for (const auto &x : ids)
      if (x.get<int>() == id) return;
    ids.push_back(id);
  };
  for (const auto &m : got.logged) {
    addId(m.id);
    if (!m.data.empty()) logdata.push_back({{"id", m.id}, {"data", m.data}});
  }
  if (d.ruleId != 0) {
    addId(d.ruleId);
    std::string data = logField(d.interventionLog, "data");
    if (!data.empty()) logdata.push_back({{"id", d.ruleId}, {"data", data}});
  }
  json out = {{"id", req.value("id", "")}, {"interrupted", d.interrupted}, {"status", d.status},
              {"matched_ids", ids}, {"logdata", logdata}};
  if (d.ruleId != 0) out["rule_id"] = d.ruleId;
  return out;
}

}  // namespace

int main(int argc, char **argv) {
  std::string config, in, out;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--config") config = argv[i + 1];
    else if (k == "--in") in = argv[i + 1];
    else if (k == "--out") out = argv[i + 1];
    else {
      std::cerr << "unknown argument " << k << "\n";
      return 2;
    }
  }
  if (config.empty() || in.empty() || out.empty()) {
    std::cerr << "usage: modsec-diff --config FILE --in requests.jsonl --out decisions.jsonl\n";
    return 2;
  }
  modsecurity::ModSecurity *ms = msc_init();
  msc_set_connector_info(ms, "waf-modsec-diff/1.0");
  ms->setServerLogCb(onLog, modsecurity::RuleMessageLogProperty);
  modsecurity::RulesSet *rules = msc_create_rules_set();
  const char *error = nullptr;
  if (msc_rules_add_file(rules, config.c_str(), &error) < 0) {
    std::cerr << "loading " << config << " failed: " << (error ? error : "(no message)") << "\n";
    return 3;
  }
  std::ifstream requests(in);
  std::ofstream decisions(out);
  if (!requests || !decisions) {
    std::cerr << "cannot open " << (requests ? out : in) << "\n";
    return 2;
  }
  std::string line;
  while (std::getline(requests, line)) {
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    decisions << decide(ms, rules, json::parse(line)).dump(-1, ' ', false, json::error_handler_t::replace)
              << "\n";
  }
  msc_rules_cleanup(rules);
  msc_cleanup(ms);
  return 0;
}
