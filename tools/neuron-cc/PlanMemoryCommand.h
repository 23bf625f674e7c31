#pragma once

namespace neuroncc {
// Runs `neuron-cc plan-memory` with the arguments after the subcommand name;
// returns the process exit status.
int runPlanMemory(int argc, char** argv);
}  // namespace neuroncc
