//===- Timeline.cpp - Device activities of graph replays, laid out --------===//
#include "Timeline.h"

#include <cxxabi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>

namespace mlart::bench {

namespace {

double us(uint64_t ns, uint64_t origin) {
  return double(int64_t(ns - origin)) / 1e3;
}

const char *kindName(TraceActivity::Kind k) {
  switch (k) {
  case TraceActivity::Kind::Kernel:
    return "kernel";
  case TraceActivity::Kind::Memcpy:
    return "memcpy";
  case TraceActivity::Kind::Memset:
    return "memset";
  }
  return "?";
}

void eraseAll(std::string &s, const std::string &what) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what))
    s.erase(at, what.size());
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string fixed(double v, int decimals = 3) {
  if (std::isnan(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

} // namespace

std::string shortKernelName(const std::string &name, size_t maxLength) {
  std::string s = name;
  if (s.rfind("_Z", 0) == 0) {
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> d(
        abi::__cxa_demangle(s.c_str(), nullptr, nullptr, &status), &std::free);
    if (status == 0 && d)
      s = d.get();
  }
  // The parameter list: the parenthesis that closes at the very end.
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')')
        ++depth;
      else if (s[i] == '(' && --depth == 0) {
        s.erase(i);
        break;
      }
    }
  }
  if (s.rfind("void ", 0) == 0)
    s.erase(0, 5);
  eraseAll(s, "(anonymous namespace)::");
  eraseAll(s, "mlart::cuda::");
  eraseAll(s, "mlart::");
  if (maxLength >= 4 && s.size() > maxLength)
    s = s.substr(0, maxLength - 3) + "...";
  return s;
}

ReplayTimeline layoutReplay(std::vector<TraceActivity> activities) {
  ReplayTimeline r;
  if (activities.empty())
    return r;
  std::sort(activities.begin(), activities.end(),
            [](const TraceActivity &a, const TraceActivity &b) {
              return std::tie(a.start, a.end, a.stream, a.name) <
                     std::tie(b.start, b.end, b.stream, b.name);
            });
  const uint64_t origin = activities.front().start;
  std::map<uint32_t, uint64_t> streamEnd; // last end per stream so far
  uint64_t maxEnd = origin; // latest end of the activities so far
  uint64_t busy = 0;
  for (size_t i = 0; i < activities.size(); ++i) {
    const TraceActivity &a = activities[i];
    const uint64_t end = std::max(a.end, a.start);
    TimelineEntry e;
    e.activity = a;
    e.shortName = a.kind == TraceActivity::Kind::Kernel ? shortKernelName(a.name)
                                                        : kindName(a.kind);
    e.startUs = us(a.start, origin);
    e.endUs = us(end, origin);
    e.durationUs = e.endUs - e.startUs;
    auto it = streamEnd.find(a.stream);
    e.streamGapUs = it == streamEnd.end() ? NAN : us(a.start, it->second);
    e.idleBeforeUs = i > 0 && a.start > maxEnd ? us(a.start, maxEnd) : 0.0;
    e.criticalGapUs = NAN;
    // The union of [start, end) in start order: only what lies past maxEnd
    // is new busy time.
    if (end > std::max(a.start, maxEnd))
      busy += end - std::max(a.start, maxEnd);
    maxEnd = std::max(maxEnd, end);
    streamEnd[a.stream] =
        it == streamEnd.end() ? end : std::max(it->second, end);
    r.entries.push_back(std::move(e));
  }
  r.spanUs = us(maxEnd, origin);
  r.busyUs = double(busy) / 1e3;
  r.idleUs = r.spanUs - r.busyUs;
  r.streams = int(streamEnd.size());

  // Critical path estimate: from the activity that ends last (the later
  // start on a tie), repeatedly the one that ended last before it started.
  auto endOf = [&](size_t i) {
    return std::max(r.entries[i].activity.end, r.entries[i].activity.start);
  };
  size_t cur = 0;
  for (size_t i = 1; i < r.entries.size(); ++i)
    if (endOf(i) >= endOf(cur))
      cur = i;
  for (;;) {
    r.entries[cur].critical = true;
    const uint64_t start = r.entries[cur].activity.start;
    size_t best = r.entries.size();
    for (size_t i = 0; i < r.entries.size(); ++i)
      if (i != cur && endOf(i) <= start &&
          (best == r.entries.size() || endOf(i) > endOf(best) ||
           (endOf(i) == endOf(best) &&
            r.entries[i].activity.start > r.entries[best].activity.start)))
        best = i;
    if (best == r.entries.size() || r.entries[best].critical)
      break;
    r.entries[cur].criticalGapUs = us(start, endOf(best));
    cur = best;
  }
  return r;
}

std::vector<ReplayTimeline>
buildTimelines(const std::vector<TraceActivity> &activities,
               const std::vector<ReplayWindow> &windows) {
  std::vector<std::vector<TraceActivity>> perReplay(windows.size());
  for (const TraceActivity &a : activities)
    for (size_t w = 0; w < windows.size(); ++w)
      if (a.start >= windows[w].begin && a.start <= windows[w].end) {
        perReplay[w].push_back(a);
        break;
      }
  std::vector<ReplayTimeline> out;
  for (std::vector<TraceActivity> &acts : perReplay)
    out.push_back(layoutReplay(std::move(acts)));
  return out;
}

std::string formatTimelineText(const std::vector<ReplayTimeline> &replays,
                               const std::string &title) {
  std::string out;
  char line[512];
  for (size_t r = 0; r < replays.size(); ++r) {
    const ReplayTimeline &t = replays[r];
    std::snprintf(line, sizeof line,
                  "== %s, replay %zu of %zu: span %.2f us, busy %.2f us, "
                  "idle %.2f us, %zu activities on %d stream(s) ==\n",
                  title.c_str(), r + 1, replays.size(), t.spanUs, t.busyUs,
                  t.idleUs, t.entries.size(), t.streams);
    out += line;
    out += "   #  stream  start_us    end_us    dur_us  str_gap  idle_bef  "
           "crit_gap  name\n";
    for (size_t i = 0; i < t.entries.size(); ++i) {
      const TimelineEntry &e = t.entries[i];
      char gap[32], crit[32];
      if (std::isnan(e.streamGapUs))
        std::snprintf(gap, sizeof gap, "%7s", "-");
      else
        std::snprintf(gap, sizeof gap, "%7.2f", e.streamGapUs);
      // "*": first on the critical path; a gap: later on it; blank: off it.
      if (!e.critical)
        std::snprintf(crit, sizeof crit, "%8s", "");
      else if (std::isnan(e.criticalGapUs))
        std::snprintf(crit, sizeof crit, "%8s", "*");
      else
        std::snprintf(crit, sizeof crit, "%8.2f", e.criticalGapUs);
      std::snprintf(line, sizeof line,
                    "%4zu  %6u  %8.2f  %8.2f  %8.2f  %s  %8.2f  %s  %s\n", i,
                    e.activity.stream, e.startUs, e.endUs, e.durationUs, gap,
                    e.idleBeforeUs, crit, e.shortName.c_str());
      out += line;
    }
    out += "\n";
  }
  return out;
}

std::string formatTimelineJson(const std::vector<ReplayTimeline> &replays,
                               const std::string &title) {
  std::string out = "{\n  \"title\": " + jsonString(title) +
                    ",\n  \"replays\": [\n";
  for (size_t r = 0; r < replays.size(); ++r) {
    const ReplayTimeline &t = replays[r];
    out += "    {\"span_us\": " + fixed(t.spanUs) +
           ", \"busy_us\": " + fixed(t.busyUs) +
           ", \"idle_us\": " + fixed(t.idleUs) +
           ", \"streams\": " + std::to_string(t.streams) +
           ", \"activities\": [\n";
    for (size_t i = 0; i < t.entries.size(); ++i) {
      const TimelineEntry &e = t.entries[i];
      out += "      {\"name\": " + jsonString(e.activity.name) +
             ", \"short_name\": " + jsonString(e.shortName) +
             ", \"kind\": \"" + kindName(e.activity.kind) +
             "\", \"stream\": " + std::to_string(e.activity.stream) +
             ", \"start_us\": " + fixed(e.startUs) +
             ", \"end_us\": " + fixed(e.endUs) +
             ", \"duration_us\": " + fixed(e.durationUs) +
             ", \"stream_gap_us\": " + fixed(e.streamGapUs) +
             ", \"idle_before_us\": " + fixed(e.idleBeforeUs) +
             ", \"critical\": " + (e.critical ? "true" : "false") +
             ", \"critical_gap_us\": " + fixed(e.criticalGapUs) +
             ", \"bytes\": " + std::to_string(e.activity.bytes) + "}" +
             (i + 1 < t.entries.size() ? ",\n" : "\n");
    }
    out += std::string("    ]}") + (r + 1 < replays.size() ? ",\n" : "\n");
  }
  return out + "  ]\n}\n";
}

} // namespace mlart::bench
