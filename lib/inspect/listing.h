#pragma once
// Listing for `ftx inspect`: everything formats/ can open, plus FT `N-gpu/` folders, whose .bin
// files carry no shapes: those come from config.ini through the model's weight layout.
#include <string>

#include "formats/checkpoint.h"

namespace ftx {

bool is_ft_model_dir(const std::string& path);
// Every weight file of an FT folder, in layout order, as views of the mapped files. A file whose
// size disagrees with config.ini is an Error; files the layout does not know are listed as uint8.
CheckpointListing list_ft_model_dir(const std::string& dir);
// Dispatches to list_ft_model_dir or open_checkpoint.
CheckpointListing list_any(const std::string& path);

}  // namespace ftx
