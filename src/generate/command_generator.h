// The "command" generator: an outside program (outside_program.h) asked for each question's
// candidates. Private to the generate layer (make_generators builds it).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nl2sql/generate/generator.h"
#include "nl2sql/generate/outside_program.h"

namespace nl2sql::generate {

struct CommandOptions {
  std::string label;
  int64_t samples = 1;                 // sent as `samples` (how many the program should write)
  std::optional<double> temperature;   // sent as `temperature` (null: the profile's)
  bool descriptions = true;            // of the schema sent
  int64_t examples = 3;
};

std::unique_ptr<Generator> make_command_generator(CommandOptions options, OutsideProgramSpec spec,
                                                  llm::Client* client);

// The request line of a question (exposed for tests): the protocol fields are added by
// OutsideProgram::ask.
nlohmann::json generation_request(const GenerationInput& input, const CommandOptions& options);

}  // namespace nl2sql::generate
