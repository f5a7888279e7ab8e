#include "model/core/architecture.hpp"

#include <map>

#include "model/core/error.hpp"

namespace baton::model {

namespace {

using kind = layer_declaration::kind;

/// The convnet's output width, and the heads' default input width.
constexpr int64_t convnet_features = 256;
/// resnet18's output width.
constexpr int64_t resnet18_features = 512;

layer_declaration conv3x3(const char* name, int64_t in, int64_t out) {
  return {name, kind::convolution, in, out, 3, 1, 1};
}
layer_declaration linear(const char* name, int64_t in, int64_t out, bool bias = true) {
  return {name, kind::linear, in, out, 0, 1, 0, bias};
}
layer_declaration relu(const char* name) { return {name, kind::relu}; }
layer_declaration pool2x2(const char* name) { return {name, kind::max_pool, 0, 0, 2, 2}; }
layer_declaration flatten(const char* name) { return {name, kind::flatten}; }
layer_declaration basic_block(const char* name, int64_t in, int64_t out, int64_t stride = 1) {
  return {name, kind::basic_block, in, out, 3, stride};
}

/// The convnet's flattened width: 128 channels after three 2x2 pools
/// (floor), 128x3x3 = 1152 for 28x28 input, 128x4x4 for 32x32.
int64_t convnet_flat(const model_spec& spec) {
  if (spec.in_height < 8 || spec.in_width < 8)
    throw error("model '" + spec.name + "' takes images of at least 8x8 (three 2x2 pools), got " +
                std::to_string(spec.in_height) + "x" + std::to_string(spec.in_width));
  return 128 * (spec.in_height / 8) * (spec.in_width / 8);
}

/// The convnet backbone up to its flatten (28x28 input -> 128x3x3 = 1152).
std::vector<layer_declaration> convnet_trunk(int64_t in_channels) {
  return {conv3x3("conv1", in_channels, 32), relu("relu1"),
          conv3x3("conv2", 32, 32),          relu("relu2"),
          pool2x2("pool1"),                  conv3x3("conv3", 32, 64),
          relu("relu3"),                     conv3x3("conv4", 64, 64),
          relu("relu4"),                     pool2x2("pool2"),
          conv3x3("conv5", 64, 128),         relu("relu5"),
          pool2x2("pool3"),                  flatten("flatten")};
}

std::vector<layer_declaration> convnet(const model_spec& spec) {
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear("fc1", convnet_flat(spec), convnet_features));
  layers.push_back(relu("relu6"));
  return layers;
}

std::vector<layer_declaration> convnet_wide(const model_spec& spec) {
  if (spec.wide_features <= 0)
    throw error("model 'convnet_wide': expected wide_features > 0, got " +
                std::to_string(spec.wide_features));
  auto layers = convnet_trunk(spec.in_channels);
  layers.push_back(linear("fc1", convnet_flat(spec), spec.wide_features));
  layers.push_back(relu("relu6"));
  layers.push_back(linear("fc1b", spec.wide_features, convnet_features));
  layers.push_back(relu("relu7"));
  return layers;
}

/// torchvision's resnet18 up to its average pool and flatten (no fc): the
/// 7x7 stride-2 stem (over `in_channels` input channels) and max pool, then
/// four stages of two BasicBlocks. 3x32x32 input -> 64x8x8 after the stem ->
/// 512x1x1 -> 512 features.
std::vector<layer_declaration> resnet18(int64_t in_channels) {
  return {{"conv1", kind::convolution, in_channels, 64, 7, 2, 3, false},
          {"bn1", kind::batch_norm, 64, 64},
          relu("relu"),
          {"maxpool", kind::max_pool, 0, 0, 3, 2, 1},
          basic_block("layer1_0", 64, 64),
          basic_block("layer1_1", 64, 64),
          basic_block("layer2_0", 64, 128, 2),
          basic_block("layer2_1", 128, 128),
          basic_block("layer3_0", 128, 256, 2),
          basic_block("layer3_1", 256, 256),
          basic_block("layer4_0", 256, resnet18_features, 2),
          basic_block("layer4_1", resnet18_features, resnet18_features),
          {"avgpool", kind::average_pool},
          flatten("flatten")};
}

std::vector<layer_declaration> head(const model_spec& spec) {
  return {linear("fc1", spec.features, 128), relu("relu1"), linear("fc2", 128, spec.classes)};
}

/// C*H*W -> 4096 -> 4096 -> classes, batch norm without running statistics (so that
/// training and evaluation compute the same function) and no biases.
std::vector<layer_declaration> mlp(const model_spec& spec) {
  constexpr int64_t hidden = 4096;
  return {flatten("flatten"),
          linear("fc1", spec.in_channels * spec.in_height * spec.in_width, hidden, false),
          {"bn1", kind::feature_norm, hidden, hidden},
          relu("relu1"),
          linear("fc2", hidden, hidden, false),
          {"bn2", kind::feature_norm, hidden, hidden},
          relu("relu2"),
          linear("fc3", hidden, spec.classes, false)};
}

/// Every declared model by name: what is_declared and declare_model read.
const std::map<std::string, model_declaration (*)(const model_spec&)>& declarations() {
  static const std::map<std::string, model_declaration (*)(const model_spec&)> table{
    {"convnet",
     [](const model_spec& s) {
       return model_declaration{convnet(s), weight_init::kaiming_fan_in};
     }},
    {"convnet_wide",
     [](const model_spec& s) {
       return model_declaration{convnet_wide(s), weight_init::kaiming_fan_in};
     }},
    {"resnet18",
     [](const model_spec& s) {
       return model_declaration{resnet18(s.in_channels), weight_init::kaiming_fan_out};
     }},
    {"classifier",
     [](const model_spec& s) {
       return model_declaration{{linear("fc2", s.features, s.classes)}};
     }},
    {"head", [](const model_spec& s) { return model_declaration{head(s)}; }},
    {"mlp", [](const model_spec& s) { return model_declaration{mlp(s)}; }},
  };
  return table;
}

} // namespace

const std::vector<std::string>& backbone_models() {
  static const std::vector<std::string> models{"convnet", "convnet_wide", "resnet18",
                                               "torchscript"};
  return models;
}

bool is_declared(const std::string& model_name) {
  return declarations().count(model_name) > 0;
}

model_declaration declare_model(const model_spec& spec) {
  if ((spec.name == "classifier" || spec.name == "head" || spec.name == "mlp") &&
      spec.classes <= 0)
    throw error("model '" + spec.name + "': expected classes > 0, got " +
                std::to_string(spec.classes));
  if ((spec.name == "classifier" || spec.name == "head") && spec.features <= 0)
    throw error("model '" + spec.name + "': expected features > 0, got " +
                std::to_string(spec.features));
  if (auto found = declarations().find(spec.name); found != declarations().end())
    return found->second(spec);
  throw error("unknown model '" + spec.name + "', expected convnet, convnet_wide, resnet18, "
              "classifier, head, mlp or torchscript");
}

layer_listing listing_of(const model_declaration& declaration) {
  layer_listing out;
  for (const auto& layer : declaration.layers) {
    out.names.push_back(layer.name);
    if (layer.what == layer_declaration::kind::feature_norm)
      out.batch_dependent.push_back(layer.name);
  }
  return out;
}

model_spec pretrain_classifier(int64_t features, int64_t classes) {
  model_spec classifier;
  classifier.name = "classifier";
  classifier.classes = classes;
  classifier.features = features;
  return classifier;
}

int64_t declared_features(const model_declaration& declaration) {
  for (auto layer = declaration.layers.rbegin(); layer != declaration.layers.rend(); ++layer)
    if (layer->out > 0)
      return layer->out;
  throw error("a declared model without a layer of known width");
}

} // namespace baton::model
