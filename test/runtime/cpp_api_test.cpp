//===- cpp_api_test.cpp - the C++ wrapper (tailor/runtime.hpp) ------------===//
//
// Usage: cpp_api_test FORWARD.tplan TRAIN.tplan WORK_DIR (the plans of
// c_api_test.c, made by RunCApiTest.sh). Drives the wrapper's Plan, Session
// and Trainer as an application would: names, weights, a run stopped from
// the callback, a resume that reproduces the uninterrupted losses bit for
// bit, and errors that come back as Status values.
//
//===----------------------------------------------------------------------===//

#include "tailor/runtime.hpp"

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <vector>

namespace {

int failures = 0;

void check(bool condition, const char *what) {
  if (!condition) {
    std::fprintf(stderr, "FAIL: %s (last error: %s)\n", what,
                 tailor_last_error());
    ++failures;
  }
}

void writeTokens(const std::string &path) {
  std::vector<uint16_t> tokens(400);
  for (size_t k = 0; k < tokens.size(); ++k) {
    tokens[k] = static_cast<uint16_t>((7 * k + k / 3 + 1) % 97);
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(tokens.data()),
             static_cast<std::streamsize>(tokens.size() * 2));
}

void testSession(const std::string &forwardPath, const std::string &work) {
  auto plan = tailor::Plan::load(forwardPath);
  check(plan.ok(), "load the forward plan");
  if (!plan) {
    return;
  }
  check(plan->parameters().size() == 2, "two parameters");
  check(plan->states().empty(), "no states");
  auto session = tailor::Session::create(*plan, 2);
  check(session.ok(), "a session");
  std::vector<float> head(800, 0.25f);
  check(session->setParameter("head", TAILOR_F32, {8, 100}, head.data(),
                              head.size() * 4)
            .ok(),
        "setParameter");
  tailor::Status wrong = session->setParameter("head", TAILOR_F32, {100, 8},
                                               head.data(), head.size() * 4);
  check(wrong.code() == TAILOR_ERROR_INVALID_ARGUMENT &&
            wrong.message().find("[8, 100]") != std::string::npos,
        "a wrong shape is a Status naming the expected one");
  check(session->applyAdapter(work + "/no-adapter").code() == TAILOR_ERROR_IO,
        "a missing adapter directory");
  check(session->loadSafetensors(work + "/none.safetensors").error().code() ==
            TAILOR_ERROR_IO,
        "a missing safetensors file");
}

std::vector<double> wholeRun(const tailor::Plan &plan,
                             const std::string &work) {
  std::string out = work + "/cpp-whole";
  std::string data = work + "/cpp-tokens.bin";
  auto options = tailor::Trainer::options(data.c_str(), out.c_str());
  options.num_threads = 2;
  std::vector<double> losses;
  auto trainer = tailor::Trainer::create(plan, options);
  check(trainer.ok(), "a trainer");
  if (!trainer) {
    return losses;
  }
  check(trainer
            ->run([&](const tailor_train_metrics &m) {
              losses.push_back(m.loss);
              return false;
            })
            .ok(),
        "run to the end");
  check(losses.size() == 6, "six steps");
  check(trainer->step().error().code() == TAILOR_ERROR_INVALID_ARGUMENT,
        "no step past max_steps");
  return losses;
}

void testTrainer(const std::string &trainPath, const std::string &work) {
  writeTokens(work + "/cpp-tokens.bin");
  auto plan = tailor::Plan::load(trainPath);
  check(plan.ok(), "load the training plan");
  if (!plan) {
    return;
  }
  check(plan->states().size() >= 4, "AdamW states");
  std::vector<double> whole = wholeRun(*plan, work);
  std::string out = work + "/cpp-parts";
  std::string data = work + "/cpp-tokens.bin";
  auto options = tailor::Trainer::options(data.c_str(), out.c_str());
  options.num_threads = 2;
  options.save_steps = 0;
  std::vector<double> losses;
  {
    auto trainer = tailor::Trainer::create(*plan, options);
    check(trainer.ok(), "a trainer");
    if (!trainer) {
      return;
    }
    auto first = trainer->step();
    check(first.ok() && first->step == 1, "step 1");
    losses.push_back(first->loss);
    check(trainer->evaluate().error().code() == TAILOR_ERROR_INVALID_ARGUMENT,
          "no validation data");
    // An exception in the callback stops the run and comes back here.
    bool threw = false;
    try {
      (void)trainer->run([](const tailor_train_metrics &) -> bool {
        throw std::runtime_error("from the callback");
      });
    } catch (const std::runtime_error &) {
      threw = true;
    }
    check(threw, "the callback's exception is rethrown");
    auto state = trainer->state();
    check(state.ok() && state->step == 2 && state->interrupted,
          "the throwing callback stopped after step 2");
    auto checkpoint = trainer->saveCheckpoint();
    check(checkpoint.ok() &&
              checkpoint->find("checkpoint-2") != std::string::npos,
          "checkpoint-2");
  }
  auto trainer = tailor::Trainer::create(*plan, options);
  check(trainer.ok() && trainer->resume().ok(), "resume the latest");
  check(trainer->state()->step == 2, "at step 2");
  check(trainer
            ->run([&](const tailor_train_metrics &m) {
              losses.push_back(m.loss);
              return false;
            })
            .ok(),
        "run to the end");
  check(losses.size() == 5 && whole.size() == 6 && losses[0] == whole[0] &&
            losses[1] == whole[2] && losses[4] == whole[5],
        "steps 1, 3..6 equal the uninterrupted run's bit for bit");
  check(trainer->exportTo(work + "/cpp-export").ok(), "export");
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: cpp_api_test FORWARD.tplan TRAIN.tplan "
                         "WORK_DIR\n");
    return 2;
  }
  testSession(argv[1], argv[3]);
  testTrainer(argv[2], argv[3]);
  if (failures) {
    std::fprintf(stderr, "cpp_api_test: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("cpp_api_test: Plan, Session and Trainer of runtime.hpp pass\n");
  return 0;
}
