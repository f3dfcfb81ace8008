//===- CommandLine.cpp - Declarative options of the runtime tools ---------===//
#include "common/CommandLine.h"

#include <cassert>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#ifndef MLART_TOOLS_VERSION
#define MLART_TOOLS_VERSION "unknown"
#endif

namespace mlart::tool {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// strtoll and strtod skip leading blanks and stop at the first character
/// they cannot use; a value must be all number.
bool startsLikeNumber(const std::string &text) {
  return !text.empty() && !std::isspace(static_cast<unsigned char>(text[0]));
}

std::optional<int64_t> parseInt(const std::string &text) {
  if (!startsLikeNumber(text))
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return std::nullopt;
  return int64_t(v);
}

std::optional<double> parseDouble(const std::string &text) {
  if (!startsLikeNumber(text))
    return std::nullopt;
  errno = 0;
  char *end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  // ERANGE also flags underflow to a denormal or 0, which is a fine value.
  if (*end != '\0' || (errno == ERANGE && std::isinf(v)))
    return std::nullopt;
  return v;
}

std::string formatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// "a, b or c".
std::string joinChoices(const std::vector<std::string> &choices) {
  std::string s;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0)
      s += i + 1 == choices.size() ? " or " : ", ";
    s += choices[i];
  }
  return s;
}

/// `text` wrapped at 80 columns, each line indented by `indent` spaces.
std::string wrap(const std::string &text, size_t indent) {
  constexpr size_t kWidth = 80;
  std::string out, line;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos)
      end = text.size();
    const std::string word = text.substr(pos, end - pos);
    pos = end + 1;
    if (word.empty())
      continue;
    if (!line.empty() && indent + line.size() + 1 + word.size() > kWidth) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty())
    out += std::string(indent, ' ') + line + "\n";
  return out;
}

} // namespace

//===----------------------------------------------------------------------===//
// Option
//===----------------------------------------------------------------------===//

Option Option::flag(std::string name, bool *out, std::string help) {
  Option o(std::move(name), Kind::Flag, "", std::move(help));
  o.out_ = out;
  return o;
}

Option Option::flag(std::string name, std::optional<bool> *out, bool value,
                    std::string help) {
  Option o(std::move(name), Kind::Flag, "", std::move(help));
  o.out_ = out;
  o.flagValue_ = value;
  return o;
}

Option Option::integer(std::string name, int64_t *out, int64_t min, int64_t max,
                       std::string valueName, std::string help) {
  Option o(std::move(name), Kind::Int, std::move(valueName), std::move(help));
  o.out_ = out;
  o.minInt_ = min;
  o.maxInt_ = max;
  o.defaultText_ = std::to_string(*out);
  return o;
}

Option Option::integer(std::string name, int *out, int64_t min, int64_t max,
                       std::string valueName, std::string help) {
  assert(min >= std::numeric_limits<int>::min() &&
         max <= std::numeric_limits<int>::max() && "the range must fit int");
  Option o(std::move(name), Kind::Int, std::move(valueName), std::move(help));
  o.out_ = out;
  o.minInt_ = min;
  o.maxInt_ = max;
  o.defaultText_ = std::to_string(*out);
  return o;
}

Option Option::real(std::string name, double *out, double min, double max,
                    std::string valueName, std::string help) {
  Option o(std::move(name), Kind::Double, std::move(valueName),
           std::move(help));
  o.out_ = out;
  o.minDouble_ = min;
  o.maxDouble_ = max;
  o.defaultText_ = formatDouble(*out);
  return o;
}

Option Option::string(std::string name, std::string *out, std::string valueName,
                      std::string help) {
  Option o(std::move(name), Kind::String, std::move(valueName),
           std::move(help));
  o.out_ = out;
  o.defaultText_ = *out;
  return o;
}

Option Option::list(std::string name, std::vector<std::string> *out,
                    std::string valueName, std::string help) {
  Option o(std::move(name), Kind::List, std::move(valueName), std::move(help));
  o.out_ = out;
  return o;
}

std::string Option::synopsis() const {
  std::string s = "--" + name_;
  if (kind_ == Kind::OneOf) {
    s += " ";
    for (size_t i = 0; i < choices_.size(); ++i)
      s += (i ? "|" : "") + choices_[i];
  } else if (takesValue()) {
    s += " " + valueName_;
  }
  return s;
}

std::string Option::rangeText() const {
  if (kind_ == Kind::Int) {
    if (minInt_ == kInt64Min && maxInt_ == kInt64Max)
      return "";
    if (maxInt_ == kInt64Max)
      return ">= " + std::to_string(minInt_);
    if (minInt_ == kInt64Min)
      return "<= " + std::to_string(maxInt_);
    return "in [" + std::to_string(minInt_) + ", " + std::to_string(maxInt_) +
           "]";
  }
  if (kind_ == Kind::Double) {
    if (minDouble_ == -kInf && maxDouble_ == kInf)
      return "";
    if (maxDouble_ == kInf)
      return ">= " + formatDouble(minDouble_);
    if (minDouble_ == -kInf)
      return "<= " + formatDouble(maxDouble_);
    return "in [" + formatDouble(minDouble_) + ", " + formatDouble(maxDouble_) +
           "]";
  }
  return "";
}

/// "an integer >= 1": what the error says the option needs.
std::string Option::needs() const {
  std::string what = noun_;
  if (what.empty())
    what = kind_ == Kind::Int ? "an integer"
           : finite_          ? "a finite number"
                              : "a number";
  const std::string range = rangeText();
  return range.empty() ? what : what + " " + range;
}

std::string Option::describe() const {
  std::string extra;
  if (kind_ == Kind::Int || kind_ == Kind::Double) {
    const std::string range = rangeText();
    if (!range.empty())
      extra = valueName_ + " " + range;
  }
  if (kind_ == Kind::List)
    extra = "repeatable";
  if (!defaultText_.empty())
    extra += (extra.empty() ? "" : "; ") + ("default " + defaultText_);
  return extra.empty() ? help_ : help_ + " (" + extra + ")";
}

std::optional<std::string> Option::apply(const std::string &value) const {
  const std::string bad = ", not '" + value + "'";
  switch (kind_) {
  case Kind::Flag:
    return "--" + name_ + " takes no value";
  case Kind::Int: {
    std::optional<int64_t> v = parseInt(value);
    if (!v || *v < minInt_ || *v > maxInt_)
      return "--" + name_ + " needs " + needs() + bad;
    if (auto *p = std::get_if<int64_t *>(&out_))
      **p = *v;
    else
      *std::get<int *>(out_) = int(*v);
    return std::nullopt;
  }
  case Kind::Double: {
    std::optional<double> v = parseDouble(value);
    // A NaN (allowNonFinite) is in no range: it skips the range test.
    if (!v || (finite_ && !std::isfinite(*v)) ||
        (!std::isnan(*v) && (*v < minDouble_ || *v > maxDouble_)))
      return "--" + name_ + " needs " + needs() + bad;
    *std::get<double *>(out_) = *v;
    return std::nullopt;
  }
  case Kind::String:
    *std::get<std::string *>(out_) = value;
    return std::nullopt;
  case Kind::List:
    std::get<std::vector<std::string> *>(out_)->push_back(value);
    return std::nullopt;
  case Kind::OneOf:
    for (size_t i = 0; i < choices_.size(); ++i)
      if (choices_[i] == value) {
        setChoice_(i);
        return std::nullopt;
      }
    return "--" + name_ + " is " + joinChoices(choices_) + bad;
  }
  return "--" + name_ + ": unknown option kind";
}

void Option::set() const {
  if (auto *p = std::get_if<bool *>(&out_))
    **p = flagValue_;
  else if (auto *q = std::get_if<std::optional<bool> *>(&out_))
    **q = flagValue_;
}

//===----------------------------------------------------------------------===//
// CommandLine
//===----------------------------------------------------------------------===//

CommandLine::CommandLine(std::string tool, std::string synopsis,
                         std::string overview)
    : tool_(std::move(tool)), synopsis_(std::move(synopsis)),
      overview_(std::move(overview)) {}

void CommandLine::add(Option option) {
  // --help and --version are every tool's; a name twice would leave one
  // declaration unreachable.
  if (option.name() == "help" || option.name() == "version" ||
      find(option.name()))
    declarationError_ = "--" + option.name() + " is declared twice";
  options_.push_back(std::move(option));
}

void CommandLine::add(std::vector<Option> options) {
  for (Option &o : options)
    add(std::move(o));
}

void CommandLine::addPositional(Positional positional) {
  if (positional.required && !positionals_.empty() &&
      !positionals_.back().required)
    declarationError_ = "required " + positional.name +
                        " after an optional "
                        "positional argument";
  positionals_.push_back(std::move(positional));
}

const Option *CommandLine::find(const std::string &name) const {
  for (const Option &o : options_)
    if (o.name() == name)
      return &o;
  return nullptr;
}

ParseResult CommandLine::parse(int argc, const char *const *argv) const {
  using Action = ParseResult::Action;
  auto error = [](std::string message) {
    return ParseResult{Action::Error, std::move(message)};
  };
  if (!declarationError_.empty())
    return error("internal error: " + declarationError_);
  size_t positionals = 0;
  bool optionsEnded = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (optionsEnded || arg.size() < 2 || arg[0] != '-') {
      // "-" alone is a value (stdin, by convention), not an option.
      if (positionals == positionals_.size())
        return error(positionals_.empty()
                         ? "unexpected argument '" + arg + "'"
                         : "too many arguments: unexpected '" + arg + "'");
      *positionals_[positionals++].out = arg;
      continue;
    }
    if (arg == "--") {
      optionsEnded = true;
      continue;
    }
    if (arg[1] != '-')
      return error("unknown option '" + arg + "'");
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> inlineValue;
    if (eq != std::string::npos)
      inlineValue = arg.substr(eq + 1);
    if ((name == "help" || name == "version") && !inlineValue)
      return {name == "help" ? Action::Help : Action::Version, ""};
    const Option *option = find(name);
    if (!option) {
      if (name == "help" || name == "version")
        return error("--" + name + " takes no value");
      return error("unknown option '--" + name + "'");
    }
    if (!option->takesValue()) {
      if (inlineValue)
        return error("--" + name + " takes no value");
      option->set();
      continue;
    }
    std::string value;
    if (inlineValue)
      value = *inlineValue;
    else if (i + 1 < argc)
      value = argv[++i]; // even if it starts with '-': "--bound -3"
    else
      return error("missing value for " + option->synopsis());
    if (std::optional<std::string> message = option->apply(value))
      return error(*message);
  }
  size_t required = 0;
  for (const Positional &p : positionals_)
    required += p.required;
  if (positionals < required)
    return error("missing " + positionals_[positionals].name);
  return {};
}

std::string CommandLine::usageLine() const {
  return "usage: " + tool_ + (synopsis_.empty() ? "" : " " + synopsis_);
}

std::string CommandLine::helpText() const {
  std::string s = usageLine() + "\n\n" + wrap(overview_, 0);
  if (!positionals_.empty()) {
    s += "\narguments:\n";
    for (const Positional &p : positionals_)
      s += "  " + p.name + (p.required ? "" : " (optional)") + "\n" +
           wrap(p.help, 6);
  }
  s += "\noptions:\n";
  for (const Option &o : options_)
    s += "  " + o.synopsis() + "\n" + wrap(o.describe(), 6);
  s += "  --help\n" + wrap("print this help and exit", 6);
  s += "  --version\n" + wrap("print the version and exit", 6);
  return s;
}

std::string CommandLine::versionText() const {
  return tool_ + " version " + projectVersion();
}

std::optional<int> CommandLine::parseOrExit(int argc,
                                            const char *const *argv) const {
  const ParseResult result = parse(argc, argv);
  switch (result.action) {
  case ParseResult::Action::Run:
    return std::nullopt;
  case ParseResult::Action::Help:
    std::fputs(helpText().c_str(), stdout);
    return 0;
  case ParseResult::Action::Version:
    std::printf("%s\n", versionText().c_str());
    return 0;
  case ParseResult::Action::Error:
    return usageError(result.error);
  }
  return 2;
}

int CommandLine::usageError(const std::string &message) const {
  std::fprintf(stderr, "%s: %s\n%s\n(%s --help lists the options)\n",
               tool_.c_str(), message.c_str(), usageLine().c_str(),
               tool_.c_str());
  return 2;
}

const char *projectVersion() { return MLART_TOOLS_VERSION; }

} // namespace mlart::tool
