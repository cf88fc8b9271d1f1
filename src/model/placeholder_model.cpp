// placeholder until the model layer lands
