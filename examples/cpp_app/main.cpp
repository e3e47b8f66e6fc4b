// Runs a compiled tessel artifact through the C++ runtime API (docs/deploy.md).
//
//   cpp_app MODEL.tsl OUT_DIR [NAME=FILE ...]
//
// As examples/c_app: inputs from raw files (zeros when not named), outputs
// written to OUT_DIR/output_<i>.bin; one line on stderr and exit 1 on error.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <tessel/tessel.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " MODEL.tsl OUT_DIR [NAME=FILE ...]\n";
    return 2;
  }
  try {
    const tessel::rt::Model model(argv[1]);
    std::vector<tessel::rt::Tensor> inputs;
    for (const tessel::rt::ValueInfo& info : model.inputs()) {
      for (size_t d = 0; d < info.dims.size(); ++d)
        if (info.dims[d] < 0) throw std::runtime_error("input '" + info.name + "' has symbolic dim '" +
                                                       info.dim_names[d] + "': compile with --dim");
      inputs.emplace_back(info.dtype, info.dims);
      for (int a = 3; a < argc; ++a) {
        const std::string arg = argv[a];
        if (arg.rfind(info.name + "=", 0) != 0) continue;
        const std::string path = arg.substr(info.name.size() + 1);
        std::ifstream f(path, std::ios::binary);
        const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        if (!f.good() && !f.eof()) throw std::runtime_error(path + ": cannot read");
        if (bytes.size() != inputs.back().nbytes())
          throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, input '" + info.name +
                                   "' takes " + std::to_string(inputs.back().nbytes()));
        std::copy(bytes.begin(), bytes.end(), static_cast<char*>(inputs.back().data()));
      }
    }
    const std::vector<tessel::rt::Tensor> outputs = model.run(std::move(inputs));
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string path = std::string(argv[2]) + "/output_" + std::to_string(i) + ".bin";
      std::ofstream f(path, std::ios::binary);
      f.write(static_cast<const char*>(outputs[i].data()), static_cast<std::streamsize>(outputs[i].nbytes()));
      if (!f) throw std::runtime_error("cannot write " + path);
      std::cout << "output " << i << ": " << outputs[i].nbytes() << " bytes -> " << path << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
