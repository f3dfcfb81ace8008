//===- CommandLine.h - Declarative options of the runtime tools -*- C++ -*-===//
//
// The runtime's tools (mla-run, mla-bench) link no LLVM, so llvm::cl is not
// available to them. This is their small replacement: a tool declares each
// option once, in a table (name, what value it takes and its range, where
// the value goes, its --help text), and its positional arguments; parse()
// checks every value completely (no atoi: "abc", "4294967297" or "1x" for
// an integer are errors naming the flag and the accepted range), names
// unknown options and missing values, and answers --help (every option,
// on stdout) and --version. Nothing here throws.
//
//===----------------------------------------------------------------------===//
#ifndef MLART_TOOLS_COMMANDLINE_H
#define MLART_TOOLS_COMMANDLINE_H

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mlart::tool {

/// One option: `--name`, `--name value` or `--name=value`.
class Option {
public:
  enum class Kind {
    Flag,   ///< no value
    Int,    ///< an integer in [min, max]
    Double, ///< a number in [min, max], finite unless allowNonFinite()
    String, ///< any text
    OneOf,  ///< one of a list of names
    List,   ///< any text, repeatable: every occurrence is kept, in order
  };

  /// Sets `*out` to true.
  static Option flag(std::string name, bool *out, std::string help);
  /// Sets `*out` to `value`: two flags that share a setting (--per-op,
  /// --no-per-op), the last one given wins.
  static Option flag(std::string name, std::optional<bool> *out, bool value,
                     std::string help);
  /// `valueName` stands for the value in --help ("N").
  static Option integer(std::string name, int64_t *out, int64_t min,
                        int64_t max, std::string valueName, std::string help);
  /// As above; [min, max] must lie within int's range.
  static Option integer(std::string name, int *out, int64_t min, int64_t max,
                        std::string valueName, std::string help);
  static Option real(std::string name, double *out, double min, double max,
                     std::string valueName, std::string help);
  static Option string(std::string name, std::string *out,
                       std::string valueName, std::string help);
  static Option list(std::string name, std::vector<std::string> *out,
                     std::string valueName, std::string help);
  /// Stores the value paired with the name given.
  template <typename T>
  static Option oneOf(std::string name, T *out,
                      std::vector<std::pair<std::string, T>> choices,
                      std::string help) {
    Option o(std::move(name), Kind::OneOf, "", std::move(help));
    std::vector<T> values;
    for (auto &[choice, value] : choices) {
      o.choices_.push_back(choice);
      values.push_back(value);
    }
    for (size_t i = 0; i < values.size(); ++i)
      if (values[i] == *out)
        o.defaultText_ = o.choices_[i];
    o.setChoice_ = [out, values](size_t i) { *out = values[i]; };
    return o;
  }

  /// Doubles only: accept nan and inf.
  Option &allowNonFinite() {
    finite_ = false;
    return *this;
  }
  /// What the value is, in errors: "--streams needs a count >= 1, not
  /// '0'" for "a count" (default "an integer" / "a finite number").
  Option &noun(std::string what) {
    noun_ = std::move(what);
    return *this;
  }

  const std::string &name() const { return name_; }
  Kind kind() const { return kind_; }
  bool takesValue() const { return kind_ != Kind::Flag; }
  /// The "--name VALUE" part of --help.
  std::string synopsis() const;
  /// The help text with the accepted values and the default appended.
  std::string describe() const;
  /// Stores `value`; an error message naming the option if it is not
  /// acceptable, else nothing.
  std::optional<std::string> apply(const std::string &value) const;
  /// A flag: stores its value.
  void set() const;

private:
  Option(std::string name, Kind kind, std::string valueName, std::string help)
      : name_(std::move(name)), kind_(kind), valueName_(std::move(valueName)),
        help_(std::move(help)) {}

  std::string rangeText() const;
  std::string needs() const;

  std::string name_;
  Kind kind_;
  std::string valueName_;
  std::string help_;
  std::string noun_;
  std::string defaultText_; ///< the storage's value when declared
  int64_t minInt_ = std::numeric_limits<int64_t>::min();
  int64_t maxInt_ = std::numeric_limits<int64_t>::max();
  double minDouble_ = -std::numeric_limits<double>::infinity();
  double maxDouble_ = std::numeric_limits<double>::infinity();
  bool finite_ = true;
  bool flagValue_ = true;
  std::vector<std::string> choices_;
  std::function<void(size_t)> setChoice_;
  std::variant<std::monostate, bool *, std::optional<bool> *, int *, int64_t *,
               double *, std::string *, std::vector<std::string> *>
      out_;
};

/// A positional argument, in declaration order.
struct Positional {
  std::string name; ///< "ARTIFACT" in --help
  std::string *out;
  std::string help;
  bool required = true; ///< optional ones must come after required ones
};

/// What parse() found.
struct ParseResult {
  enum class Action { Run, Help, Version, Error };
  Action action = Action::Run;
  std::string error; ///< Error: what is wrong, without the tool's name
};

/// A tool's command line: its options, positional arguments and help.
class CommandLine {
public:
  /// `synopsis` follows the tool's name in the usage line ("ARTIFACT
  /// [options]"); `overview` opens --help.
  CommandLine(std::string tool, std::string synopsis, std::string overview);

  void add(Option option);
  void add(std::vector<Option> options);
  void addPositional(Positional positional);

  /// Stores the values of argv[1..argc) through the declared pointers.
  /// Stops at --help, --version or the first error. "--" ends the
  /// options: what follows is positional.
  ParseResult parse(int argc, const char *const *argv) const;

  /// "usage: TOOL SYNOPSIS".
  std::string usageLine() const;
  /// The usage line, the overview, then every positional argument and
  /// option with its help.
  std::string helpText() const;
  /// "TOOL version VERSION", the project's version.
  std::string versionText() const;

  /// parse(), and what the tool must do about it: nothing (nullopt, run),
  /// or exit with the returned code after --help or --version (printed to
  /// stdout, 0) or an error (printed with the usage line to stderr, 2).
  std::optional<int> parseOrExit(int argc, const char *const *argv) const;
  /// A usage error found after parsing (options that need each other):
  /// prints "TOOL: message" and the usage line to stderr; returns 2.
  int usageError(const std::string &message) const;

private:
  const Option *find(const std::string &name) const;

  std::string tool_;
  std::string synopsis_;
  std::string overview_;
  std::vector<Option> options_;
  std::vector<Positional> positionals_;
  std::string declarationError_; ///< a name declared twice (a bug)
};

/// The project's version (CMake's PROJECT_VERSION).
const char *projectVersion();

} // namespace mlart::tool

#endif // MLART_TOOLS_COMMANDLINE_H
