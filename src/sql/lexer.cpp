// Tokenizer for SQLite's lexical grammar (strings, quoted identifiers, blobs, numbers,
// parameters, comments, multi-character operators).
#include <cctype>

#include "nl2sql/sql/parser.h"

namespace nl2sql::sql {
namespace {

bool is_ident_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool is_ident_char(unsigned char c) { return std::isalnum(c) || c == '_' || c == '$' || c >= 0x80; }

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_blank();
      Token t;
      t.pos = here();
      if (i_ >= s_.size()) {
        t.kind = TokenKind::kEnd;
        out.push_back(t);
        return out;
      }
      size_t start = i_;
      if (!next(t)) {
        t.kind = TokenKind::kError;
        t.text = s_.substr(start, std::max<size_t>(1, i_ - start));
        out.push_back(t);
        Token end;
        end.kind = TokenKind::kEnd;
        end.pos = here();
        out.push_back(end);
        return out;
      }
      t.text = s_.substr(start, i_ - start);
      if (t.kind != TokenKind::kString && t.kind != TokenKind::kQuotedIdent &&
          t.kind != TokenKind::kBlob)
        t.value = std::string(t.text);
      out.push_back(std::move(t));
    }
  }

 private:
  SourcePos here() const { return {static_cast<uint32_t>(i_), line_, static_cast<uint32_t>(i_ - line_start_ + 1)}; }
  char at(size_t k) const { return k < s_.size() ? s_[k] : '\0'; }
  void advance(size_t n = 1) {
    for (size_t k = 0; k < n && i_ < s_.size(); ++k) {
      if (s_[i_] == '\n') {
        ++line_;
        line_start_ = i_ + 1;
      }
      ++i_;
    }
  }

  void skip_blank() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (std::isspace(static_cast<unsigned char>(c))) {
        advance();
      } else if (c == '-' && at(i_ + 1) == '-') {
        while (i_ < s_.size() && s_[i_] != '\n') advance();
      } else if (c == '/' && at(i_ + 1) == '*') {
        advance(2);
        while (i_ < s_.size() && !(s_[i_] == '*' && at(i_ + 1) == '/')) advance();
        advance(2);  // an unterminated comment runs to the end, as in SQLite
      } else {
        return;
      }
    }
  }

  // Reads a quoted run ending in `close` where a doubled `close` is an escaped one.
  bool quoted(char close, bool doubling, std::string& value) {
    advance();  // opening quote
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == close) {
        if (doubling && at(i_ + 1) == close) {
          value.push_back(close);
          advance(2);
          continue;
        }
        advance();
        return true;
      }
      value.push_back(c);
      advance();
    }
    return false;
  }

  bool next(Token& t) {
    char c = s_[i_];
    unsigned char uc = static_cast<unsigned char>(c);
    if ((c == 'x' || c == 'X') && at(i_ + 1) == '\'') {
      advance();
      t.kind = TokenKind::kBlob;
      if (!quoted('\'', false, t.value)) return fail(t, "unterminated blob literal");
      for (char h : t.value)
        if (!std::isxdigit(static_cast<unsigned char>(h))) return fail(t, "malformed blob literal");
      if (t.value.size() % 2) return fail(t, "malformed blob literal");
      return true;
    }
    if (is_ident_start(uc)) {
      t.kind = TokenKind::kWord;
      while (i_ < s_.size() && is_ident_char(static_cast<unsigned char>(s_[i_]))) advance();
      return true;
    }
    if (c == '\'') {
      t.kind = TokenKind::kString;
      return quoted('\'', true, t.value) || fail(t, "unterminated string literal");
    }
    if (c == '"' || c == '`') {
      t.kind = TokenKind::kQuotedIdent;
      t.quote = c;
      return quoted(c, true, t.value) || fail(t, "unterminated quoted identifier");
    }
    if (c == '[') {
      t.kind = TokenKind::kQuotedIdent;
      t.quote = '[';
      return quoted(']', false, t.value) || fail(t, "unterminated [identifier]");
    }
    if (std::isdigit(uc) || (c == '.' && std::isdigit(static_cast<unsigned char>(at(i_ + 1))))) {
      t.kind = TokenKind::kNumber;
      if (c == '0' && (at(i_ + 1) == 'x' || at(i_ + 1) == 'X') &&
          std::isxdigit(static_cast<unsigned char>(at(i_ + 2)))) {
        advance(2);
        while (std::isxdigit(static_cast<unsigned char>(at(i_)))) advance();
      } else {
        while (std::isdigit(static_cast<unsigned char>(at(i_)))) advance();
        if (at(i_) == '.') {
          advance();
          while (std::isdigit(static_cast<unsigned char>(at(i_)))) advance();
        }
        if ((at(i_) == 'e' || at(i_) == 'E') &&
            (std::isdigit(static_cast<unsigned char>(at(i_ + 1))) ||
             ((at(i_ + 1) == '+' || at(i_ + 1) == '-') &&
              std::isdigit(static_cast<unsigned char>(at(i_ + 2)))))) {
          advance(2);
          while (std::isdigit(static_cast<unsigned char>(at(i_)))) advance();
        }
      }
      if (is_ident_start(static_cast<unsigned char>(at(i_)))) return fail(t, "malformed number");
      return true;
    }
    if (c == '?') {
      t.kind = TokenKind::kParam;
      advance();
      while (std::isdigit(static_cast<unsigned char>(at(i_)))) advance();
      return true;
    }
    if ((c == ':' || c == '@' || c == '$') && is_ident_char(static_cast<unsigned char>(at(i_ + 1)))) {
      t.kind = TokenKind::kParam;
      advance();
      while (i_ < s_.size() && is_ident_char(static_cast<unsigned char>(s_[i_]))) advance();
      return true;
    }
    static const char* kOps[] = {"->>", "||", "->", "<<", ">>", "<=", ">=", "==", "!=", "<>",
                                 "<",   ">",  "=",  "+",  "-",  "*",  "/",  "%",  "&",  "|",
                                 "~",   "(",  ")",  ",",  ".",  ";"};
    for (const char* op : kOps) {
      std::string_view o(op);
      if (s_.substr(i_, o.size()) == o) {
        t.kind = TokenKind::kOperator;
        advance(o.size());
        return true;
      }
    }
    advance();
    return fail(t, "unrecognized character");
  }

  bool fail(Token& t, const char* why) {
    t.value = why;
    return false;
  }

  std::string_view s_;
  size_t i_ = 0;
  uint32_t line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view sql) { return Lexer(sql).run(); }

}  // namespace nl2sql::sql
